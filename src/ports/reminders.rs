//! The `ReminderStore` port: the reminders table, the outbox applications write to.
//!
//! Pending reminders (status `scheduled`) sit in a sparse due-time index, sharded by
//! [`due_shard`]; marking a reminder enqueued, expired or cancelled removes it from the index in
//! the same conditional write.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::ops::Bound;
use std::sync::Mutex;

use super::faults::{lock, FaultPoint, Faults};
use super::PortError;
use crate::clock::Timestamp;
use crate::domain::{due_shard, Channel, Reminder, ReminderId, ReminderStatus, SubscriberId};

pub const OP_INSERT: &str = "reminders.insert";
pub const OP_REPLACE: &str = "reminders.replace";
pub const OP_GET: &str = "reminders.get";
pub const OP_QUERY: &str = "reminders.query_due";
pub const OP_MARK: &str = "reminders.mark";
pub const OP_QUARANTINE: &str = "reminders.quarantine";

/// What the scheduler reads from the index: identities, times, version, channels. No content,
/// no recipients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueReminder {
    pub reminder_id: ReminderId,
    pub subscriber_id: SubscriberId,
    pub due_at: Timestamp,
    pub fresh_until: Timestamp,
    pub payload_version: u64,
    pub channels: Vec<Channel>,
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
}

impl From<&Reminder> for DueReminder {
    fn from(r: &Reminder) -> Self {
        Self {
            reminder_id: r.reminder_id.clone(),
            subscriber_id: r.subscriber_id.clone(),
            due_at: r.due_at,
            fresh_until: r.fresh_until,
            payload_version: r.payload_version,
            channels: r.channels().collect(),
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
    /// is still `expected_status` (an edit). Only `scheduled` and `enqueued` reminders can be
    /// edited; the new status decides whether it is in the due index.
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

    /// Take an item the scheduler cannot schedule out of the due index: status `invalid` and
    /// `invalid_reason`, conditional on the item still being in the index.
    fn quarantine(
        &self,
        key: &str,
        reason: &str,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send;

    /// `scheduled` at `payload_version` → `to` (enqueued or expired), leaving the due index.
    /// `to = Cancelled` accepts any version from `scheduled` or `enqueued`.
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
    fn mark(
        &self,
        id: &ReminderId,
        payload_version: u64,
        to: ReminderStatus,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send {
        (**self).mark(id, payload_version, to)
    }
}

/// The reminders table in memory, with its due index kept ordered by (shard, due, id) as
/// DynamoDB keeps it: a page costs its own length plus what it skips, not the whole table.
#[derive(Debug, Default)]
pub struct MemoryReminderStore {
    state: Mutex<Table>,
    shards: u32,
    faults: Faults,
}

#[derive(Debug, Default)]
struct Table {
    /// By raw id, as DynamoDB keys them.
    items: BTreeMap<String, Reminder>,
    due: BTreeSet<(u32, Timestamp, String)>,
}

impl Table {
    /// Write `r`, keeping the index in step: a scheduled reminder is in it, nothing else is.
    fn put(&mut self, r: Reminder, shards: u32) {
        let key = r.reminder_id.as_str().to_owned();
        if let Some(old) = self.items.get(&key) {
            let shard = due_shard(&old.reminder_id, shards);
            self.due.remove(&(shard, old.due_at, key.clone()));
        }
        if r.status == ReminderStatus::Scheduled {
            let shard = due_shard(&r.reminder_id, shards);
            self.due.insert((shard, r.due_at, key.clone()));
        }
        self.items.insert(key, r);
    }
}

impl MemoryReminderStore {
    pub fn new(shards: u32) -> Self {
        Self::with_faults(shards, Faults::default())
    }

    pub fn with_faults(shards: u32, faults: Faults) -> Self {
        Self {
            state: Mutex::default(),
            shards: shards.max(1),
            faults,
        }
    }

    fn guarded<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Table) -> T,
    ) -> Result<T, PortError> {
        self.faults.check(op, FaultPoint::Before)?;
        let out = f(&mut lock(&self.state));
        self.faults.check(op, FaultPoint::After)?;
        Ok(out)
    }
}

/// Only reminders not yet final can be edited.
pub fn editable(status: ReminderStatus) -> bool {
    matches!(status, ReminderStatus::Scheduled | ReminderStatus::Enqueued)
}

/// The mark transition, shared rule for every adapter.
pub fn mark_allowed(current: &Reminder, payload_version: u64, to: ReminderStatus) -> bool {
    match to {
        ReminderStatus::Cancelled => matches!(
            current.status,
            ReminderStatus::Scheduled | ReminderStatus::Enqueued
        ),
        ReminderStatus::Enqueued | ReminderStatus::Expired => {
            current.status == ReminderStatus::Scheduled
                && current.payload_version == payload_version
        }
        ReminderStatus::Scheduled | ReminderStatus::Invalid => false,
    }
}

impl ReminderStore for MemoryReminderStore {
    fn shards(&self) -> u32 {
        self.shards
    }

    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        let shards = self.shards;
        self.guarded(OP_INSERT, |t| {
            if t.items.contains_key(r.reminder_id.as_str()) {
                return Inserted::AlreadyExists;
            }
            t.put(r.clone(), shards);
            Inserted::Created
        })
    }

    async fn replace(
        &self,
        r: &Reminder,
        expected_version: u64,
        expected_status: ReminderStatus,
    ) -> Result<Marked, PortError> {
        let shards = self.shards;
        self.guarded(OP_REPLACE, |t| match t.items.get(r.reminder_id.as_str()) {
            None => Marked::Missing,
            Some(cur)
                if cur.payload_version != expected_version
                    || cur.status != expected_status
                    || !editable(cur.status)
                    || !editable(r.status) =>
            {
                Marked::Changed
            }
            Some(_) => {
                t.put(r.clone(), shards);
                Marked::Marked
            }
        })
    }

    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        self.guarded(OP_GET, |t| t.items.get(id.as_str()).cloned())
    }

    async fn query_due(&self, q: &DueQuery<'_>) -> Result<DuePage, PortError> {
        self.guarded(OP_QUERY, |t| {
            let from = match q.after {
                Some(c) => Bound::Excluded((q.shard, c.due_at, c.reminder_id.clone())),
                None => Bound::Included((q.shard, Timestamp::from_millis(i64::MIN), String::new())),
            };
            // As DynamoDB: the limit counts evaluated items, filtered out or not; a filtered
            // page evaluates more, and may come back empty with a cursor.
            let budget = match q.skip.is_empty() {
                true => q.limit.max(1),
                false => q.limit.max(FILTERED_PAGE),
            };
            let budget = usize::try_from(budget).unwrap_or(usize::MAX);
            let (mut items, mut evaluated, mut next) = (Vec::new(), 0, None);
            let mut last: Option<(Timestamp, &String)> = None;
            for (shard, due_at, id) in t.due.range((from, Bound::Unbounded)) {
                if *shard != q.shard || *due_at > q.until {
                    break;
                }
                if evaluated == budget {
                    next = last.map(|(due_at, id)| DueCursor {
                        due_at,
                        reminder_id: id.clone(),
                    });
                    break;
                }
                evaluated += 1;
                last = Some((*due_at, id));
                let Some(r) = t.items.get(id) else { continue };
                if q.skip.contains(&r.subscriber_id) {
                    continue;
                }
                let due = DueReminder::from(r);
                items.push(match due.problem() {
                    None => DueEntry::Due(due),
                    Some(reason) => DueEntry::Unschedulable {
                        key: id.clone(),
                        due_at: *due_at,
                        reason,
                    },
                });
            }
            DuePage { items, next }
        })
    }

    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        let shards = self.shards;
        self.guarded(OP_QUARANTINE, |t| {
            let Some(cur) = t.items.get(key).cloned() else {
                return Marked::Missing;
            };
            if cur.status != ReminderStatus::Scheduled {
                return Marked::Changed;
            }
            let mut next = cur;
            next.status = ReminderStatus::Invalid;
            next.invalid_reason = Some(reason.to_owned());
            t.put(next, shards);
            Marked::Marked
        })
    }

    async fn mark(
        &self,
        id: &ReminderId,
        payload_version: u64,
        to: ReminderStatus,
    ) -> Result<Marked, PortError> {
        let shards = self.shards;
        self.guarded(OP_MARK, |t| match t.items.get(id.as_str()) {
            None => Marked::Missing,
            Some(cur) if !mark_allowed(cur, payload_version, to) => Marked::Changed,
            Some(cur) => {
                let mut next = cur.clone();
                next.status = to;
                t.put(next, shards);
                Marked::Marked
            }
        })
    }
}
