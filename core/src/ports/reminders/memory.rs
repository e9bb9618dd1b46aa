//! [`MemoryReminderStore`]: the reminders table in memory, for the simulation and tests, with
//! DynamoDB's semantics where they matter (conditional writes, the sparse index, a page's
//! limit counting evaluated items).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use super::*;
use crate::sync::lock;

mod packed;
mod subscribers;

/// The reminders table in memory, with its due index kept ordered by (shard, due, id) as
/// DynamoDB keeps it: a page costs its own length plus what it skips, not the whole table.
#[derive(Debug, Default)]
pub struct MemoryReminderStore {
    state: Mutex<Table>,
    shards: u32,
}

#[derive(Debug, Default)]
pub(super) struct Table {
    /// By raw id, as DynamoDB keys them; each item in its compact byte form ([`packed`]):
    /// the embedded pipeline keeps a million, and a typed one costs several times its content.
    /// Hashed: ordered reads go through `scheduled` and `due` (the listing sorts its own).
    items: HashMap<Box<str>, Arc<[u8]>>,
    /// The scheduled items, in id order, with their shard and bytes (shared with `items`):
    /// what the sweep reads as DynamoDB's sparse index holds them, not a scan of every item.
    scheduled: BTreeMap<Box<str>, (u32, Arc<[u8]>)>,
    due: BTreeSet<(u32, Timestamp, String)>,
    preferences: BTreeMap<SubscriberId, Preferences>,
    suppressions: BTreeMap<AddressHash, Suppression>,
    /// Series by id (`series_memory.rs`), with when the maker next looks at each.
    pub(super) series: BTreeMap<String, (crate::domain::series::Series, Option<Timestamp>)>,
    pub(super) series_due: BTreeSet<(Timestamp, String)>,
}

impl Table {
    /// The item stored under `id`.
    fn get(&self, id: &str) -> Option<Reminder> {
        self.items.get(id).map(|bytes| packed::read(id, bytes))
    }

    /// What the due index projects of the item stored under `id` ([`packed::due`]).
    fn due(&self, id: &str) -> Option<DueReminder> {
        self.items.get(id).map(|bytes| packed::read_due(id, bytes))
    }

    /// The status and due time of the item stored under `id`, without reading the rest.
    fn head(&self, id: &str) -> Option<(ReminderStatus, Timestamp)> {
        self.items.get(id).map(|bytes| packed::read_head(bytes))
    }

    /// Write `r`, keeping the index in step: a scheduled reminder is in it, nothing else is.
    fn put(&mut self, r: &Reminder, shards: u32) {
        let key = r.reminder_id.as_str();
        let shard = due_shard(&r.reminder_id, shards);
        if let Some((_, due_at)) = self.head(key) {
            self.due.remove(&(shard, due_at, key.to_owned()));
        }
        let bytes: Arc<[u8]> = packed::pack(r).into();
        if r.status == ReminderStatus::Scheduled {
            self.due.insert((shard, r.due_at, key.to_owned()));
            self.scheduled.insert(key.into(), (shard, bytes.clone()));
        } else {
            self.scheduled.remove(key);
        }
        // Every test that writes through this table holds the byte form exact.
        debug_assert_eq!(packed::unpack(key, &bytes).as_ref(), Some(r));
        self.items.insert(key.into(), bytes);
    }
}

impl MemoryReminderStore {
    pub fn new(shards: u32) -> Self {
        Self {
            state: Mutex::default(),
            shards: shards.max(1),
        }
    }

    /// Every suppression, by hash (the operator's list).
    pub fn suppressions(&self) -> Vec<Suppression> {
        lock(&self.state).suppressions.values().cloned().collect()
    }

    /// Lift a suppression: whether there was one.
    pub fn lift_suppression(&self, address: &AddressHash) -> bool {
        lock(&self.state).suppressions.remove(address).is_some()
    }

    /// `f` on the table, locked: every call of the memory store is answered (the `Result` is
    /// the port's).
    pub(super) fn with_table<T>(&self, f: impl FnOnce(&mut Table) -> T) -> Result<T, PortError> {
        Ok(f(&mut lock(&self.state)))
    }
}

impl ReminderStore for MemoryReminderStore {
    fn shards(&self) -> u32 {
        self.shards
    }

    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        let shards = self.shards;
        self.with_table(|t| {
            if t.items.contains_key(r.reminder_id.as_str()) {
                return Inserted::AlreadyExists;
            }
            t.put(r, shards);
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
        self.with_table(|t| match t.get(r.reminder_id.as_str()) {
            None => Marked::Missing,
            Some(cur)
                if cur.payload_version != expected_version
                    || cur.status != expected_status
                    || cur.owner != r.owner
                    || !editable(cur.status)
                    || !editable(r.status) =>
            {
                Marked::Changed
            }
            Some(_) => {
                t.put(r, shards);
                Marked::Marked
            }
        })
    }

    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        self.with_table(|t| t.get(id.as_str()))
    }

    async fn query_due(&self, q: &DueQuery<'_>) -> Result<DuePage, PortError> {
        self.with_table(|t| {
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
                let Some(due) = t.due(id) else { continue };
                if q.skip.contains(&due.subscriber_id) {
                    continue;
                }
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

    async fn sweep_index(
        &self,
        after: Option<&SweepCursor>,
        limit: u32,
    ) -> Result<SweepPage, PortError> {
        self.with_table(|t| {
            let from = match after.and_then(|c| c.0.first()) {
                Some((_, id, _)) => Bound::Excluded(id.as_str()),
                None => Bound::Unbounded,
            };
            let limit = usize::try_from(limit.max(1)).unwrap_or(usize::MAX);
            let mut items = Vec::new();
            let mut last = None;
            for (id, (shard, bytes)) in t.scheduled.range::<str, _>((from, Bound::Unbounded)) {
                if items.len() == limit {
                    break;
                }
                let due = packed::read_due(id, bytes);
                last = Some(id);
                let entry = match due.problem() {
                    None => DueEntry::Due(due),
                    Some(reason) => DueEntry::Unschedulable {
                        key: id.to_string(),
                        due_at: due.due_at,
                        reason,
                    },
                };
                items.push(SweptItem {
                    key: id.to_string(),
                    shard: Some(*shard),
                    entry,
                });
            }
            let next = last
                .filter(|_| items.len() == limit)
                .map(|id| SweepCursor(vec![("reminder_id".into(), id.to_string(), false)]));
            SweepPage { items, next }
        })
    }

    async fn extend_freshness(
        &self,
        id: &ReminderId,
        payload_version: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> Result<Marked, PortError> {
        let shards = self.shards;
        self.with_table(|t| match t.get(id.as_str()) {
            None => Marked::Missing,
            Some(cur) if cur.payload_version != payload_version || !editable(cur.status) => {
                Marked::Changed
            }
            Some(mut next) => {
                next.fresh_until = fresh_until;
                next.expires_at = expires_at;
                t.put(&next, shards);
                Marked::Marked
            }
        })
    }

    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        let shards = self.shards;
        self.with_table(|t| {
            let Some(cur) = t.get(key) else {
                return Marked::Missing;
            };
            if cur.status != ReminderStatus::Scheduled {
                // Settled but still indexed (an expiry being finished): it only leaves the
                // index, as on DynamoDB.
                let shard = due_shard(&cur.reminder_id, shards);
                t.due.remove(&(shard, cur.due_at, key.to_owned()));
                return Marked::Changed;
            }
            let mut next = cur;
            next.status = ReminderStatus::Invalid;
            next.invalid_reason = Some(reason.to_owned());
            t.put(&next, shards);
            Marked::Marked
        })
    }

    async fn preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> Result<Option<Preferences>, PortError> {
        self.with_table(|t| t.preferences.get(subscriber).cloned())
    }

    async fn put_preferences(
        &self,
        subscriber: &SubscriberId,
        prefs: &Preferences,
    ) -> Result<(), PortError> {
        self.with_table(|t| {
            t.preferences.insert(subscriber.clone(), prefs.clone());
        })
    }

    async fn suppression(&self, address: &AddressHash) -> Result<Option<Suppression>, PortError> {
        self.with_table(|t| t.suppressions.get(address).cloned())
    }

    async fn put_suppression(&self, suppression: &Suppression) -> Result<(), PortError> {
        self.with_table(|t| {
            t.suppressions
                .entry(suppression.address_hash.clone())
                .or_insert_with(|| suppression.clone());
        })
    }

    async fn mark(
        &self,
        id: &ReminderId,
        payload_version: u64,
        to: ReminderStatus,
    ) -> Result<Marked, PortError> {
        let shards = self.shards;
        self.with_table(|t| match t.get(id.as_str()) {
            None => Marked::Missing,
            Some(cur) if !mark_allowed(&cur, payload_version, to) => Marked::Changed,
            Some(mut next) => {
                let indexed = next.status == ReminderStatus::Scheduled;
                next.status = to;
                let (due_at, key) = (next.due_at, id.as_str().to_owned());
                t.put(&next, shards);
                // An expiry stays in the index until the scheduler takes it out (one already
                // enqueued left it then).
                if to == ReminderStatus::Expired && indexed {
                    t.due.insert((due_shard(id, shards), due_at, key));
                }
                Marked::Marked
            }
        })
    }
}
