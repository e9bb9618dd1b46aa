//! The `ReminderStore` port: the reminders table, the outbox applications write to.
//!
//! Pending reminders (status `scheduled`) sit in a sparse due-time index, sharded by
//! [`due_shard`]; marking a reminder enqueued, expired or cancelled removes it from the index in
//! the same conditional write.

use std::collections::BTreeSet;
use std::future::Future;

use super::PortError;

mod by_subscriber;
mod memory;
mod series_memory;
use crate::clock::Timestamp;
use crate::domain::{
    due_shard, AddressHash, Channel, Preferences, Reminder, ReminderId, ReminderStatus,
    SubscriberId, Suppression,
};
pub use by_subscriber::{
    visible_page, Listed, ReminderSummary, SubscriberCursor, SubscriberIndex, SubscriberPage,
    MAX_SCANNED, OP_BY_SUBSCRIBER,
};
pub use memory::MemoryReminderStore;

pub const OP_INSERT: &str = "reminders.insert";
pub const OP_REPLACE: &str = "reminders.replace";
pub const OP_GET: &str = "reminders.get";
pub const OP_QUERY: &str = "reminders.query_due";
pub const OP_MARK: &str = "reminders.mark";
pub const OP_QUARANTINE: &str = "reminders.quarantine";
pub const OP_EXTEND: &str = "reminders.extend_freshness";
pub const OP_SWEEP: &str = "reminders.sweep_index";
pub const OP_PREFERENCES: &str = "reminders.preferences";
pub const OP_PUT_PREFERENCES: &str = "reminders.put_preferences";
pub const OP_SUPPRESSION: &str = "reminders.suppression";
pub const OP_PUT_SUPPRESSION: &str = "reminders.put_suppression";
pub const OP_RULES: &str = "reminders.recipient_rules";
pub const OP_DELIVERY_READ: &str = "reminders.delivery_read";

/// What the scheduler reads from the index: identities, times, version, channels, and (from
/// the index that projects them) the addresses. No content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueReminder {
    pub reminder_id: ReminderId,
    pub subscriber_id: SubscriberId,
    pub due_at: Timestamp,
    pub fresh_until: Timestamp,
    pub payload_version: u64,
    pub channels: Vec<Channel>,
    /// Every address the reminder lists, when the index projects them (DynamoDB's
    /// `due-recipients-index`; the in-memory table's); empty from the first `due-index`. The
    /// scheduler hashes them for the consumer's one read ([`DueReminder::sole`]).
    pub addresses: Vec<crate::domain::Recipient>,
    /// Marked `expired` but still in the index: the scheduler's expiry stopped between its
    /// mark and the ledger's `expired` writes (a crash, a failed write). The next run finishes
    /// it (the ledger, then out of the index); nothing sends it.
    pub expiring: bool,
}

impl DueReminder {
    /// Why a readable index item still cannot be scheduled, naming the field.
    pub fn problem(&self) -> Option<String> {
        if self.channels.is_empty() {
            return Some("channels: empty (no channel to send to)".into());
        }
        if self.fresh_until <= self.due_at {
            return Some("fresh_until: not after due_at".into());
        }
        None
    }

    /// The address of `channel` when the reminder lists it alone at its first version (as
    /// the consumer's standby step judges a reminder alone): its message may be claimed first
    /// and read in one request. `None` when the index did not project the addresses.
    pub fn sole(&self, channel: Channel) -> Option<&crate::domain::Recipient> {
        match self.addresses.as_slice() {
            [only] if only.channel() == channel && self.payload_version <= 1 => Some(only),
            _ => None,
        }
    }
}

impl From<&Reminder> for DueReminder {
    fn from(r: &Reminder) -> Self {
        Self {
            reminder_id: r.reminder_id.clone(),
            subscriber_id: r.subscriber_id.clone(),
            due_at: r.due_at,
            fresh_until: r.fresh_until,
            payload_version: r.payload_version,
            channels: r.channels().filter(|c| !r.enqueued.contains(c)).collect(),
            addresses: r.recipients.values().cloned().collect(),
            expiring: r.status == ReminderStatus::Expired,
        }
    }
}

/// What [`ReminderStore::delivery_read`] read: the reminder (`Err` only when it cannot be
/// read: `Corrupt`), the preferences and the suppression.
#[derive(Debug)]
pub struct DeliveryRead {
    pub reminder: Result<Option<Reminder>, PortError>,
    pub prefs: Option<Preferences>,
    pub suppression: Option<Suppression>,
}

/// Items a page evaluates when it filters out skipped subscribers (DynamoDB's `Limit` counts
/// items evaluated, not returned).
pub const FILTERED_PAGE: u32 = 1_000;

/// One item of the due index, decoded on its own: a bad item never fails its page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DueEntry {
    Due(DueReminder),
    /// An item the scheduler cannot schedule; it is quarantined by its raw key.
    Unschedulable {
        key: String,
        due_at: Timestamp,
        reason: String,
    },
}

impl DueEntry {
    /// Index order: due time, then id.
    pub fn order(&self) -> (Timestamp, &str) {
        match self {
            DueEntry::Due(d) => (d.due_at, d.reminder_id.as_str()),
            DueEntry::Unschedulable { key, due_at, .. } => (*due_at, key),
        }
    }
}

/// Where a due-index page ended (exclusive). The id is the raw key: an item whose id does not
/// parse still has a place in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueCursor {
    pub due_at: Timestamp,
    pub reminder_id: String,
}

/// Where a sweep of the due index goes on: the last item's key attributes, as the store read
/// them (each a name, its value, and whether it is a number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepCursor(pub Vec<(String, String, bool)>);

/// One item of the due index as a sweep reads it, whatever its shard or due time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweptItem {
    pub key: String,
    /// `None` when the item's `due_shard` is not a whole number.
    pub shard: Option<u32>,
    pub entry: DueEntry,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SweepPage {
    pub items: Vec<SweptItem>,
    pub next: Option<SweepCursor>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DuePage {
    /// Oldest first.
    pub items: Vec<DueEntry>,
    /// Where to go on; `None` when the shard has nothing more due.
    pub next: Option<DueCursor>,
}

/// One page of one shard of the due index.
#[derive(Debug, Clone, Copy)]
pub struct DueQuery<'a> {
    pub shard: u32,
    /// Due at or before this.
    pub until: Timestamp,
    /// Items per page, at most.
    pub limit: u32,
    pub after: Option<&'a DueCursor>,
    /// Subscribers whose items the store leaves out (they reached their cap this run): the
    /// store filters them, so they cost no one else's scan budget.
    pub skip: &'a BTreeSet<SubscriberId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    Created,
    AlreadyExists,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marked {
    Marked,
    /// The reminder is not in the expected version or state (edited, cancelled, already done).
    Changed,
    Missing,
}

pub trait ReminderStore: Send + Sync {
    /// Number of due-index shards the scheduler reads (`0..shards()`): every shard an item
    /// may sit in, whatever shard count wrote it.
    fn shards(&self) -> u32;

    /// Create; never overwrites.
    fn insert(&self, r: &Reminder) -> impl Future<Output = Result<Inserted, PortError>> + Send;

    /// Replace a reminder whose stored `payload_version` is `expected_version` and whose status
    /// is still `expected_status` and whose owner is `r.owner` (an edit: owners never change,
    /// so an edit lands only on the owner's item). Only `scheduled` and `enqueued` reminders
    /// can be edited; the new status decides whether it is in the due index.
    fn replace(
        &self,
        r: &Reminder,
        expected_version: u64,
        expected_status: ReminderStatus,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send;

    fn get(
        &self,
        id: &ReminderId,
    ) -> impl Future<Output = Result<Option<Reminder>, PortError>> + Send;

    /// Items of one shard of the due index due at or before `q.until`, oldest first, each
    /// decoded on its own.
    fn query_due(
        &self,
        q: &DueQuery<'_>,
    ) -> impl Future<Output = Result<DuePage, PortError>> + Send;

    /// Move `fresh_until` (and the TTL with it) of a reminder still at `payload_version` and
    /// not final: two attributes, nothing else of the item rewritten (redrive's operator
    /// extension; its role needs no whole-item write).
    fn extend_freshness(
        &self,
        id: &ReminderId,
        payload_version: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send;

    /// Every item of the due index, a page at a time, in no order: the sweep finds items no
    /// shard query reaches (a `due_shard` outside the shards) or that can never become due.
    fn sweep_index(
        &self,
        after: Option<&SweepCursor>,
        limit: u32,
    ) -> impl Future<Output = Result<SweepPage, PortError>> + Send;

    /// Take an item the scheduler cannot schedule out of the due index: status `invalid` and
    /// `invalid_reason`, conditional on the item still being in the index.
    fn quarantine(
        &self,
        key: &str,
        reason: &str,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send;

    /// A subscriber's preferences (DESIGN §12), stored beside the reminders; `None` when the
    /// subscriber set none. The consumer reads them after its claim, so a change that lands
    /// before the claim is seen, as a cancel is. No default: a wrapper that forgot to pass
    /// this on would send to every opted-out channel.
    fn preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> impl Future<Output = Result<Option<Preferences>, PortError>> + Send;

    /// Replace a subscriber's preferences.
    fn put_preferences(
        &self,
        _subscriber: &SubscriberId,
        _prefs: &Preferences,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        async {
            Err(PortError::Refused {
                op: OP_PUT_PREFERENCES,
                message: "this store keeps no preferences".into(),
            })
        }
    }

    /// The suppression recorded for an address (DESIGN §12), found by its keyed hash; `None`
    /// when the address is not suppressed. No default, as for preferences.
    fn suppression(
        &self,
        address: &AddressHash,
    ) -> impl Future<Output = Result<Option<Suppression>, PortError>> + Send;

    /// What the consumer reads after its claim: the subscriber's preferences and, when
    /// `address` is given, its suppression. One call, so a store can batch the two reads
    /// (DynamoDB: one `BatchGetItem`, strongly consistent); by default, the two reads.
    fn recipient_rules(
        &self,
        subscriber: &SubscriberId,
        address: Option<&AddressHash>,
    ) -> impl Future<Output = Result<(Option<Preferences>, Option<Suppression>), PortError>> + Send
    where
        Self: Sized,
    {
        async move {
            let prefs = self.preferences(subscriber).await?;
            let suppression = match address {
                Some(a) => self.suppression(a).await?,
                None => None,
            };
            Ok((prefs, suppression))
        }
    }

    /// The consumer's one read after a sole message's claim (issue 36): the reminder, the
    /// subscriber's preferences and, when `address` is given, its suppression. One call, so a
    /// store can batch the three (DynamoDB: one strongly consistent `BatchGetItem`); by
    /// default, the reads one by one. An unreadable reminder is its own answer.
    fn delivery_read(
        &self,
        id: &ReminderId,
        subscriber: &SubscriberId,
        address: Option<&AddressHash>,
    ) -> impl Future<Output = Result<DeliveryRead, PortError>> + Send
    where
        Self: Sized,
    {
        async move {
            let reminder = match self.get(id).await {
                Err(e) if !matches!(e, PortError::Corrupt { .. }) => return Err(e),
                other => other,
            };
            let (prefs, suppression) = self.recipient_rules(subscriber, address).await?;
            Ok(DeliveryRead {
                reminder,
                prefs,
                suppression,
            })
        }
    }

    /// Record a suppression (the first one for an address stands: a second provider answer
    /// for it changes nothing).
    fn put_suppression(
        &self,
        _suppression: &Suppression,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        async {
            Err(PortError::Refused {
                op: OP_PUT_SUPPRESSION,
                message: "this store keeps no suppressions".into(),
            })
        }
    }

    /// `scheduled` at `payload_version` → `to` (enqueued or expired), leaving the due index.
    /// `to = Cancelled` goes from `scheduled` or `enqueued`, still at `payload_version`.
    fn mark(
        &self,
        id: &ReminderId,
        payload_version: u64,
        to: ReminderStatus,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send;
}

impl<T: ReminderStore> ReminderStore for std::sync::Arc<T> {
    fn shards(&self) -> u32 {
        (**self).shards()
    }
    fn insert(&self, r: &Reminder) -> impl Future<Output = Result<Inserted, PortError>> + Send {
        (**self).insert(r)
    }
    fn replace(
        &self,
        r: &Reminder,
        expected_version: u64,
        expected_status: ReminderStatus,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send {
        (**self).replace(r, expected_version, expected_status)
    }
    fn get(
        &self,
        id: &ReminderId,
    ) -> impl Future<Output = Result<Option<Reminder>, PortError>> + Send {
        (**self).get(id)
    }
    fn query_due(
        &self,
        q: &DueQuery<'_>,
    ) -> impl Future<Output = Result<DuePage, PortError>> + Send {
        (**self).query_due(q)
    }
    fn quarantine(
        &self,
        key: &str,
        reason: &str,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send {
        (**self).quarantine(key, reason)
    }
    fn extend_freshness(
        &self,
        id: &ReminderId,
        payload_version: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send {
        (**self).extend_freshness(id, payload_version, fresh_until, expires_at)
    }
    fn sweep_index(
        &self,
        after: Option<&SweepCursor>,
        limit: u32,
    ) -> impl Future<Output = Result<SweepPage, PortError>> + Send {
        (**self).sweep_index(after, limit)
    }
    fn mark(
        &self,
        id: &ReminderId,
        payload_version: u64,
        to: ReminderStatus,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send {
        (**self).mark(id, payload_version, to)
    }
    fn preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> impl Future<Output = Result<Option<Preferences>, PortError>> + Send {
        (**self).preferences(subscriber)
    }
    fn put_preferences(
        &self,
        subscriber: &SubscriberId,
        prefs: &Preferences,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).put_preferences(subscriber, prefs)
    }
    fn suppression(
        &self,
        address: &AddressHash,
    ) -> impl Future<Output = Result<Option<Suppression>, PortError>> + Send {
        (**self).suppression(address)
    }
    fn put_suppression(
        &self,
        suppression: &Suppression,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).put_suppression(suppression)
    }
    fn recipient_rules(
        &self,
        subscriber: &SubscriberId,
        address: Option<&AddressHash>,
    ) -> impl Future<Output = Result<(Option<Preferences>, Option<Suppression>), PortError>> + Send
    {
        (**self).recipient_rules(subscriber, address)
    }
    fn delivery_read(
        &self,
        id: &ReminderId,
        subscriber: &SubscriberId,
        address: Option<&AddressHash>,
    ) -> impl Future<Output = Result<DeliveryRead, PortError>> + Send {
        (**self).delivery_read(id, subscriber, address)
    }
}

/// Only reminders not yet final can be edited.
pub fn editable(status: ReminderStatus) -> bool {
    matches!(status, ReminderStatus::Scheduled | ReminderStatus::Enqueued)
}

/// The mark transition, shared rule for every adapter.
pub fn mark_allowed(current: &Reminder, payload_version: u64, to: ReminderStatus) -> bool {
    match to {
        // At the version the cancel read: a channel added since has no cancelled ledger
        // item yet, so the cancel must read again and cover it.
        ReminderStatus::Cancelled => {
            matches!(
                current.status,
                ReminderStatus::Scheduled | ReminderStatus::Enqueued
            ) && current.payload_version == payload_version
        }
        ReminderStatus::Enqueued => {
            current.status == ReminderStatus::Scheduled
                && current.payload_version == payload_version
        }
        // The scheduler's expiry of what it never enqueued, and the consumer's of an enqueued
        // reminder found stale: at the version read, so that an edit that landed since (a
        // reschedule, more freshness) wins, and once marked no edit lands (issue 32, window 1).
        ReminderStatus::Expired => {
            matches!(
                current.status,
                ReminderStatus::Scheduled | ReminderStatus::Enqueued
            ) && current.payload_version == payload_version
        }
        ReminderStatus::Scheduled | ReminderStatus::Invalid => false,
    }
}
