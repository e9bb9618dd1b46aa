//! Taking due reminders fairly: a merge of the shards' due-time pages, oldest first, with a
//! per-subscriber cap per run (docs/design.md, "Per-subscriber cap").
//!
//! A subscriber that reaches its cap is added to the skip set the store filters on: its
//! remaining items are neither taken nor counted against the run's scan budget, so a
//! subscriber with a backlog of any size delays no one else. Items the index holds but the
//! scheduler cannot schedule come back as [`DueEntry::Unschedulable`], to be quarantined.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use futures::stream::{self, StreamExt};

use crate::clock::Timestamp;
use crate::domain::SubscriberId;
use crate::ports::{DueCursor, DueEntry, DuePage, DueQuery, DueReminder, PortError, ReminderStore};

/// Shard queries in flight at once while refilling.
const QUERY_CONCURRENCY: usize = 8;

pub(super) struct Limits {
    pub until: Timestamp,
    /// The share of the virtual shards this run reads.
    pub share: super::Share,
    pub per_subscriber_cap: u32,
    pub max_take: u32,
    pub max_scan: u32,
    pub page_size: u32,
}

#[derive(Debug, Default)]
pub(super) struct Taken {
    pub picked: Vec<DueReminder>,
    /// Index items that cannot be scheduled: (raw key, reason naming the field).
    pub unschedulable: Vec<(String, String)>,
    /// Items counted against the scan budget (taken or unschedulable).
    pub scanned: u32,
    /// Items of subscribers over their cap seen this run (not counted against the budget).
    pub skipped_over_cap: u32,
    pub queries: u32,
    /// Shard queries that failed: those shards wait for the next run; the others go on.
    pub query_failures: u32,
    /// Which shards failed, with the error.
    pub failed_shards: Vec<(u32, String)>,
}

struct Shard {
    id: u32,
    buf: VecDeque<DueEntry>,
    cursor: Option<DueCursor>,
    done: bool,
}

struct Scan<'a, S> {
    store: &'a S,
    limits: &'a Limits,
    shards: Vec<Shard>,
    skip: BTreeSet<SubscriberId>,
    per_subscriber: BTreeMap<SubscriberId, u32>,
    taken: Taken,
    last_error: Option<PortError>,
}

pub(super) async fn take_due<S: ReminderStore>(
    store: &S,
    limits: &Limits,
    mut out_of_time: impl FnMut() -> bool,
) -> Result<Taken, PortError> {
    let shards = (0..store.shards())
        .filter(|id| limits.share.owns(*id))
        .map(|id| Shard {
            id,
            buf: VecDeque::new(),
            cursor: None,
            done: false,
        })
        .collect();
    let mut scan = Scan {
        store,
        limits,
        shards,
        skip: BTreeSet::new(),
        per_subscriber: BTreeMap::new(),
        taken: Taken::default(),
        last_error: None,
    };
    while (scan.taken.picked.len() as u32) < limits.max_take
        && scan.taken.scanned < limits.max_scan
        && !out_of_time()
    {
        scan.refill().await;
        match scan.next_oldest() {
            Some(entry) => scan.take(entry),
            // A filtered page can come back empty with more to read: refill again.
            None if scan.shards.iter().any(|s| !s.done) => continue,
            None => break,
        }
    }
    let every_query_failed = scan.taken.queries == 0 && scan.taken.query_failures > 0;
    if let (true, Some(e)) = (every_query_failed, scan.last_error.take()) {
        // Not one shard answered: a failed run, so the function's alarms see it.
        return Err(e);
    }
    Ok(scan.taken)
}

impl<S: ReminderStore> Scan<'_, S> {
    /// Query every shard whose buffer ran dry, a few at a time. A shard whose query fails is
    /// done for this run (its items wait for the next); the others go on.
    async fn refill(&mut self) {
        let (store, limits, skip) = (self.store, self.limits, &self.skip);
        let wanted: Vec<(usize, u32, Option<DueCursor>)> = self
            .shards
            .iter()
            .enumerate()
            .filter(|(_, s)| s.buf.is_empty() && !s.done)
            .map(|(i, s)| (i, s.id, s.cursor.clone()))
            .collect();
        let pages: Vec<(usize, Result<DuePage, PortError>)> = stream::iter(wanted)
            .map(|(i, shard, cursor)| async move {
                let q = DueQuery {
                    shard,
                    until: limits.until,
                    limit: limits.page_size,
                    after: cursor.as_ref(),
                    skip,
                };
                (i, store.query_due(&q).await)
            })
            .buffer_unordered(QUERY_CONCURRENCY)
            .collect()
            .await;
        for (i, page) in pages {
            let shard = &mut self.shards[i];
            let page = match page {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(shard = shard.id, error = %e, "due-index query failed; shard left for the next run");
                    self.taken.query_failures += 1;
                    self.taken.failed_shards.push((shard.id, e.to_string()));
                    shard.done = true;
                    self.last_error = Some(e);
                    continue;
                }
            };
            self.taken.queries += 1;
            // Only the new page is filtered here; buffers were purged when a cap was reached.
            for entry in page.items {
                match &entry {
                    DueEntry::Due(d) if self.skip.contains(&d.subscriber_id) => {
                        self.taken.skipped_over_cap += 1;
                    }
                    _ => shard.buf.push_back(entry),
                }
            }
            shard.done = page.next.is_none();
            shard.cursor = page.next;
        }
    }

    /// The oldest head across shards (ties broken by id, so a run is deterministic).
    fn next_oldest(&mut self) -> Option<DueEntry> {
        self.shards
            .iter_mut()
            .filter(|s| !s.buf.is_empty())
            .min_by(|a, b| a.buf[0].order().cmp(&b.buf[0].order()))?
            .buf
            .pop_front()
    }

    fn take(&mut self, entry: DueEntry) {
        let item = match entry {
            DueEntry::Due(item) => item,
            DueEntry::Unschedulable { key, reason, .. } => {
                self.taken.scanned += 1;
                self.taken.unschedulable.push((key, reason));
                return;
            }
        };
        if self.skip.contains(&item.subscriber_id) {
            self.taken.skipped_over_cap += 1;
            return;
        }
        self.taken.scanned += 1;
        let count = self
            .per_subscriber
            .entry(item.subscriber_id.clone())
            .or_default();
        *count += 1;
        if *count >= self.limits.per_subscriber_cap {
            // At the cap: the store leaves this subscriber out from now on.
            self.skip.insert(item.subscriber_id.clone());
            self.purge(&item.subscriber_id);
        }
        self.taken.picked.push(item);
    }

    /// Items already buffered for a subscriber that just reached its cap: skipped, not
    /// scanned. Once per subscriber per run.
    fn purge(&mut self, subscriber: &SubscriberId) {
        for shard in &mut self.shards {
            let before = shard.buf.len();
            shard.buf.retain(|e| match e {
                DueEntry::Due(d) => d.subscriber_id != *subscriber,
                DueEntry::Unschedulable { .. } => true,
            });
            let dropped = u32::try_from(before - shard.buf.len()).unwrap_or(u32::MAX);
            self.taken.skipped_over_cap += dropped;
        }
    }
}
