//! The sweep: now and then the first share reads the whole due index, whatever the shard or
//! due time, and quarantines with a reason what no shard query would ever reach — a
//! `due_shard` outside the shards the scheduler reads, an unreadable one — or what can never
//! become due (an unreadable `due_at`, a `fresh_until` not after it). Such an item would
//! otherwise sit in the index forever, unlisted and unexplained.
//!
//! It runs on the run's clock once every `sweep_every`, within the run's deadline, and goes
//! on from where it stopped when a run's time runs out.

use std::sync::Mutex;

use super::{RunReport, Scheduler};
use crate::clock::{Clock, Timestamp};
use crate::ports::{DueEntry, Ports, ReminderStore, SweepCursor, SweptItem};
use crate::sync::lock;

/// Items a sweep page reads.
const SWEEP_PAGE: u32 = 1_000;

/// Where the sweep stands, kept by the warm function between runs.
#[derive(Debug, Default)]
pub(super) struct SweepState {
    /// When the last complete sweep began; `None` before the first.
    last: Option<Timestamp>,
    /// A sweep cut short by a run's deadline goes on from here.
    cursor: Option<SweepCursor>,
}

pub(super) type Sweeping = Mutex<SweepState>;

/// Why a swept item can never be scheduled, or `None` if a shard query will reach it.
pub fn unreachable(item: &SweptItem, shards: u32) -> Option<String> {
    match (item.shard, &item.entry) {
        (None, _) => Some("due_shard: must be a whole number".into()),
        (Some(s), _) if s >= shards => Some(format!(
            "due_shard: {s} is outside the shards the scheduler reads (0 to {})",
            shards.saturating_sub(1)
        )),
        (_, DueEntry::Unschedulable { reason, .. }) => Some(reason.clone()),
        (_, DueEntry::Due(_)) => None,
    }
}

impl<P: Ports> Scheduler<P> {
    /// Sweep if one is due (or one was cut short), quarantining what it finds.
    pub(super) async fn sweep(&self, deadline: Option<Timestamp>, report: &mut RunReport) {
        let now = self.ports.clock().now();
        let mut cursor = {
            let state = lock(&self.sweeping);
            let due = state
                .last
                .is_none_or(|at| now.since(at) >= self.cfg.sweep_every);
            if state.cursor.is_none() && !due {
                return;
            }
            state.cursor.clone()
        };
        let store = self.ports.reminders();
        let shards = store.shards();
        let mut done = false;
        loop {
            if self.out_of_time(deadline, self.cfg.deadline_margin * 3) {
                break;
            }
            let page = match store.sweep_index(cursor.as_ref(), SWEEP_PAGE).await {
                Ok(page) => page,
                Err(e) => {
                    // Counted, and tried again on the next run (not a period later).
                    report.sweep_failures += 1;
                    tracing::error!(error = %e, "due-index sweep failed; it goes on next run");
                    break;
                }
            };
            report.requests.queries += 1;
            report.swept += u32::try_from(page.items.len()).unwrap_or(u32::MAX);
            let found: Vec<(String, String)> = page
                .items
                .iter()
                .filter_map(|item| unreachable(item, shards).map(|why| (item.key.clone(), why)))
                .collect();
            self.quarantine(&found, report).await;
            cursor = page.next;
            if cursor.is_none() {
                done = true;
                break;
            }
        }
        let mut state = lock(&self.sweeping);
        state.cursor = cursor;
        // A period counts from a sweep that read the whole index.
        if done {
            state.last = Some(now);
        }
    }
}
