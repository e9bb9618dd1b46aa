//! The `ReminderStore` port: the reminders table, which applications write to.
//!
//! Pending reminders (status `scheduled`) sit in a sparse due-time index, sharded by
//! [`due_shard`]; marking a reminder enqueued, expired or cancelled removes it from the index in
//! the same conditional write.

use std::future::Future;

use super::PortError;

mod by_subscriber;
mod due;
mod memory;
mod series_memory;
use crate::clock::Timestamp;
use crate::domain::{
    due_shard, AddressHash, Preferences, Reminder, ReminderId, ReminderStatus, SubscriberId,
    Suppression,
};
pub use by_subscriber::{
    visible_page, Listed, ReminderSummary, SubscriberCursor, SubscriberIndex, SubscriberPage,
    MAX_SCANNED, OP_BY_SUBSCRIBER,
};
pub use due::{
    DueCursor, DueEntry, DuePage, DueQuery, DueReminder, SweepCursor, SweepPage, SweptItem,
    FILTERED_PAGE,
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

/// What [`ReminderStore::delivery_read`] read: the reminder (`Err` only when it cannot be
/// read: `Corrupt`), the preferences and the suppression.
#[derive(Debug)]
pub struct DeliveryRead {
    pub reminder: Result<Option<Reminder>, PortError>,
    pub prefs: Option<Preferences>,
    pub suppression: Option<Suppression>,
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

    /// A subscriber's preferences (docs/design.md, "Preferences and quiet hours"), stored beside
    /// the reminders; `None` when the subscriber set none. The consumer reads them after its claim,
    /// so a change that lands before the claim is seen, as a cancel is. No default: a wrapper that
    /// forgot to pass this on would send to every opted-out channel.
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

    /// The suppression recorded for an address (docs/design.md, "Suppressions"), found by its keyed
    /// hash; `None` when the address is not suppressed. No default, as for preferences.
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
        rules_read_apart(self, subscriber, address)
    }

    /// The consumer's one read after a sole message's claim: the reminder, the subscriber's
    /// preferences and, when `address` is given, its suppression. One call, so a store can batch
    /// the three (DynamoDB: one strongly consistent `BatchGetItem`); by default, the reads one by
    /// one. An unreadable reminder is its own answer.
    fn delivery_read(
        &self,
        id: &ReminderId,
        subscriber: &SubscriberId,
        address: Option<&AddressHash>,
    ) -> impl Future<Output = Result<DeliveryRead, PortError>> + Send
    where
        Self: Sized,
    {
        delivery_read_apart(self, id, subscriber, address)
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

/// A recipient's rules read one by one, as the trait's default does: the preferences, then the
/// suppression of `address` if there is one. A wrapper that models each read on its own (the
/// simulation's meter) reads them so too.
pub async fn rules_read_apart<S: ReminderStore>(
    store: &S,
    subscriber: &SubscriberId,
    address: Option<&AddressHash>,
) -> Result<(Option<Preferences>, Option<Suppression>), PortError> {
    let prefs = store.preferences(subscriber).await?;
    let suppression = match address {
        Some(a) => store.suppression(a).await?,
        None => None,
    };
    Ok((prefs, suppression))
}

/// A delivery's read made of its parts, as the trait's default does: the reminder (an
/// unreadable one is kept as its error, for the consumer to quarantine), then the rules.
pub async fn delivery_read_apart<S: ReminderStore>(
    store: &S,
    id: &ReminderId,
    subscriber: &SubscriberId,
    address: Option<&AddressHash>,
) -> Result<DeliveryRead, PortError> {
    let reminder = match store.get(id).await {
        Err(e) if !matches!(e, PortError::Corrupt { .. }) => return Err(e),
        other => other,
    };
    let (prefs, suppression) = store.recipient_rules(subscriber, address).await?;
    Ok(DeliveryRead {
        reminder,
        prefs,
        suppression,
    })
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
        // reschedule, more freshness) wins, and once marked no edit lands.
        ReminderStatus::Expired => {
            matches!(
                current.status,
                ReminderStatus::Scheduled | ReminderStatus::Enqueued
            ) && current.payload_version == payload_version
        }
        ReminderStatus::Scheduled | ReminderStatus::Invalid => false,
    }
}
