//! What the scheduler reads of the due index: its items (decoded one by one, a bad one never
//! failing its page), its pages and cursors, and the sweep's.

use std::collections::BTreeSet;

use crate::clock::Timestamp;
use crate::domain::{Channel, Reminder, ReminderId, ReminderStatus, SubscriberId};

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
