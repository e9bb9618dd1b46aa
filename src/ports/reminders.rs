//! The `ReminderStore` port: the reminders table, the outbox applications write to.
//!
//! Pending reminders (status `scheduled`) sit in a sparse due-time index, sharded by
//! [`due_shard`]; marking a reminder enqueued, expired or cancelled removes it from the index in
//! the same conditional write.

use std::collections::BTreeMap;
use std::future::Future;
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

/// Where a due-index page ended (exclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueCursor {
    pub due_at: Timestamp,
    pub reminder_id: ReminderId,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DuePage {
    /// Oldest first.
    pub items: Vec<DueReminder>,
    pub next: Option<DueCursor>,
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
    /// Number of due-index shards this store writes.
    fn shards(&self) -> u32;

    /// Create; never overwrites.
    fn insert(&self, r: &Reminder) -> impl Future<Output = Result<Inserted, PortError>> + Send;

    /// Replace a reminder whose stored `payload_version` is `expected_version` and whose status
    /// is still `r.status` (an edit). Only `scheduled` and `enqueued` reminders can be edited;
    /// an enqueued one stays out of the due index.
    fn replace(
        &self,
        r: &Reminder,
        expected_version: u64,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send;

    fn get(
        &self,
        id: &ReminderId,
    ) -> impl Future<Output = Result<Option<Reminder>, PortError>> + Send;

    /// Scheduled reminders of one shard due at or before `until`, oldest first.
    fn query_due(
        &self,
        shard: u32,
        until: Timestamp,
        limit: u32,
        after: Option<&DueCursor>,
    ) -> impl Future<Output = Result<DuePage, PortError>> + Send;

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
    ) -> impl Future<Output = Result<Marked, PortError>> + Send {
        (**self).replace(r, expected_version)
    }
    fn get(
        &self,
        id: &ReminderId,
    ) -> impl Future<Output = Result<Option<Reminder>, PortError>> + Send {
        (**self).get(id)
    }
    fn query_due(
        &self,
        shard: u32,
        until: Timestamp,
        limit: u32,
        after: Option<&DueCursor>,
    ) -> impl Future<Output = Result<DuePage, PortError>> + Send {
        (**self).query_due(shard, until, limit, after)
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

#[derive(Debug, Default)]
pub struct MemoryReminderStore {
    items: Mutex<BTreeMap<ReminderId, Reminder>>,
    shards: u32,
    faults: Faults,
}

impl MemoryReminderStore {
    pub fn new(shards: u32) -> Self {
        Self::with_faults(shards, Faults::default())
    }

    pub fn with_faults(shards: u32, faults: Faults) -> Self {
        Self {
            items: Mutex::default(),
            shards: shards.max(1),
            faults,
        }
    }

    fn guarded<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut BTreeMap<ReminderId, Reminder>) -> T,
    ) -> Result<T, PortError> {
        self.faults.check(op, FaultPoint::Before)?;
        let out = f(&mut lock(&self.items));
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
        ReminderStatus::Scheduled => false,
    }
}

impl ReminderStore for MemoryReminderStore {
    fn shards(&self) -> u32 {
        self.shards
    }

    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        self.guarded(OP_INSERT, |items| {
            if items.contains_key(&r.reminder_id) {
                return Inserted::AlreadyExists;
            }
            items.insert(r.reminder_id.clone(), r.clone());
            Inserted::Created
        })
    }

    async fn replace(&self, r: &Reminder, expected_version: u64) -> Result<Marked, PortError> {
        self.guarded(OP_REPLACE, |items| match items.get(&r.reminder_id) {
            None => Marked::Missing,
            Some(cur)
                if cur.payload_version != expected_version
                    || cur.status != r.status
                    || !editable(r.status) =>
            {
                Marked::Changed
            }
            Some(_) => {
                items.insert(r.reminder_id.clone(), r.clone());
                Marked::Marked
            }
        })
    }

    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        self.guarded(OP_GET, |items| items.get(id).cloned())
    }

    async fn query_due(
        &self,
        shard: u32,
        until: Timestamp,
        limit: u32,
        after: Option<&DueCursor>,
    ) -> Result<DuePage, PortError> {
        let shards = self.shards;
        self.guarded(OP_QUERY, |items| {
            let mut due: Vec<&Reminder> = items
                .values()
                .filter(|r| r.status == ReminderStatus::Scheduled)
                .filter(|r| due_shard(&r.reminder_id, shards) == shard && r.due_at <= until)
                .filter(|r| match after {
                    Some(c) => (r.due_at, &r.reminder_id) > (c.due_at, &c.reminder_id),
                    None => true,
                })
                .collect();
            due.sort_by(|a, b| (a.due_at, &a.reminder_id).cmp(&(b.due_at, &b.reminder_id)));
            let more = due.len() > limit as usize;
            due.truncate(limit as usize);
            let next = more.then(|| due.last()).flatten().map(|r| DueCursor {
                due_at: r.due_at,
                reminder_id: r.reminder_id.clone(),
            });
            DuePage {
                items: due.into_iter().map(DueReminder::from).collect(),
                next,
            }
        })
    }

    async fn mark(
        &self,
        id: &ReminderId,
        payload_version: u64,
        to: ReminderStatus,
    ) -> Result<Marked, PortError> {
        self.guarded(OP_MARK, |items| match items.get_mut(id) {
            None => Marked::Missing,
            Some(cur) if !mark_allowed(cur, payload_version, to) => Marked::Changed,
            Some(cur) => {
                cur.status = to;
                Marked::Marked
            }
        })
    }
}
