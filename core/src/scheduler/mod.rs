//! The scheduler run (EventBridge Scheduler, every minute): take due reminders fairly from the
//! sharded due index ([`scan`]), quarantine the items it cannot schedule, expire the stale,
//! and fan the rest out ([`dispatch`]) as one message per channel with `DelaySeconds` for the
//! ones due inside the look-ahead. Reminders go out in small groups, a few groups at a time;
//! each reminder is marked enqueued as soon as its own messages went out, and the run stops
//! taking groups early enough to mark everything it sent before its deadline.
//!
//! Idempotent by construction: a double run, or a crash between send and mark, can enqueue a
//! delivery twice, and the ledger makes that one send.

pub mod config;
mod dispatch;
mod report;
mod scan;
mod share;
mod sweep;

pub use sweep::unreachable;

use std::time::Duration;

use futures::stream::{self, StreamExt};

use crate::clock::{ceil_secs, Clock, Timestamp};
use crate::domain::ReminderStatus;
use crate::policy::MAX_DELAY_SECS;
use crate::ports::{DueReminder, Marked, PortError, Ports, ReminderStore};
pub use config::SchedulerConfig;
pub use dispatch::message_for;
pub use report::{FailedShard, Requests, RunReport};
pub use share::Share;

/// Quarantines and expiry marks in flight at once.
const MARK_CONCURRENCY: usize = 8;

/// DelaySeconds for a message of a reminder due at `due_at`, sent at `now`: whole seconds,
/// rounded up (never early), at most 900.
pub fn delay_secs(due_at: Timestamp, now: Timestamp) -> u32 {
    u32::try_from(ceil_secs(due_at.since(now)).min(MAX_DELAY_SECS)).unwrap_or(u32::MAX)
}

pub struct Scheduler<P: Ports> {
    ports: P,
    cfg: SchedulerConfig,
    sweeping: sweep::Sweeping,
    /// Runs in a row each shard's query has failed, as this (warm) function saw them.
    failing: std::sync::Mutex<std::collections::BTreeMap<u32, u32>>,
    /// The key addresses are hashed with for a sole channel's message (the consumer's one
    /// read); without one, messages carry no hash.
    suppression_key: Option<crate::ports::secret::SuppressionKeySource>,
}

impl<P: Ports> Scheduler<P> {
    pub fn new(ports: P, cfg: SchedulerConfig) -> Self {
        Self {
            ports,
            cfg,
            sweeping: sweep::Sweeping::default(),
            failing: std::sync::Mutex::default(),
            suppression_key: None,
        }
    }

    /// Hash each sole channel's address with the key from `source`, for the consumer's one
    /// read (the consumer's own key: the same secret).
    #[must_use]
    pub fn with_suppression_key(
        mut self,
        source: Option<crate::ports::secret::SuppressionKeySource>,
    ) -> Self {
        self.suppression_key = source;
        self
    }

    pub fn ports(&self) -> &P {
        &self.ports
    }

    /// One run over the whole index. `deadline` is the invocation's, if any.
    pub async fn run(&self, deadline: Option<Timestamp>) -> Result<RunReport, PortError> {
        self.run_share(deadline, Share::default()).await
    }

    /// One run over `share` of the index (one of the stack's parallel schedules).
    pub async fn run_share(
        &self,
        deadline: Option<Timestamp>,
        share: Share,
    ) -> Result<RunReport, PortError> {
        let now = self.ports.clock().now();
        let limits = scan::Limits {
            share,
            until: now.plus(self.cfg.look_ahead),
            // The cap holds across the stack's schedules, not per schedule.
            per_subscriber_cap: share.cap_part(
                self.cfg.per_subscriber_cap,
                now.as_millis().div_euclid(60_000) as u64,
            ),
            max_take: self.cfg.max_per_run,
            max_scan: self.cfg.max_scan,
            page_size: self.cfg.page_size,
        };
        // The scan stops a margin earlier than the sends, so a run that spent its time
        // scanning still has the time to send and mark its first group.
        let mut report = RunReport::default();
        let out_of_time = || self.out_of_time(deadline, self.cfg.deadline_margin * 2);
        let taken = match scan::take_due(self.ports.reminders(), &limits, out_of_time).await {
            Ok(taken) => taken,
            Err(e) => {
                // Not one shard answered: every shard of the share failed this run.
                let all: Vec<(u32, String)> = (0..self.ports.reminders().shards())
                    .filter(|s| share.owns(*s))
                    .map(|s| (s, e.to_string()))
                    .collect();
                self.count_failures(&share, &all);
                return Err(e);
            }
        };
        report.scanned = taken.scanned;
        report.picked = u32::try_from(taken.picked.len()).unwrap_or(u32::MAX);
        // Taken oldest first: the first is the oldest due reminder not yet enqueued.
        report.backlog_age_secs = taken
            .picked
            .first()
            .map_or(0, |r| now.since(r.due_at).as_secs());
        report.skipped_over_cap = taken.skipped_over_cap;
        report.query_failures = taken.query_failures;
        report.requests.queries += taken.queries;
        report.failed_shards = self.count_failures(&share, &taken.failed_shards);
        for f in &report.failed_shards {
            tracing::error!(shard = f.shard, runs_in_a_row = f.runs_in_a_row, error = %f.error, "due-index shard query failed; its reminders wait");
        }
        self.quarantine(&taken.unschedulable, &mut report).await;
        let (stale, live): (Vec<DueReminder>, Vec<DueReminder>) = taken
            .picked
            .into_iter()
            .partition(|r| r.expiring || surely_stale(r.fresh_until, now));
        self.expire(&stale, &mut report).await;
        let key = match live.is_empty() {
            true => None,
            false => self.message_key().await,
        };
        self.dispatch(&live, key.as_ref(), deadline, &mut report)
            .await;
        // Housekeeping after the due work, in the time left: what the sweep finds, no shard
        // query reaches anyway.
        if share.index == 0 {
            self.sweep(deadline, &mut report).await;
        }
        tracing::info!(
            scanned = report.scanned,
            enqueued = report.enqueued,
            expired = report.expired,
            quarantined = report.quarantined,
            skipped_over_cap = report.skipped_over_cap,
            send_failed = report.send_failed,
            stopped_at_deadline = report.stopped_at_deadline,
            "scheduler run"
        );
        Ok(report)
    }

    /// Whether less than `reserve` is left before the invocation's deadline.
    /// Count each shard's failures in a row: a shard that answered resets. `failed` is this
    /// run's (shard, error) list.
    fn count_failures(&self, share: &Share, failed: &[(u32, String)]) -> Vec<FailedShard> {
        let mut failing = crate::sync::lock(&self.failing);
        let shards = self.ports.reminders().shards();
        let mut out = Vec::new();
        for shard in (0..shards).filter(|s| share.owns(*s)) {
            match failed.iter().find(|(s, _)| *s == shard) {
                Some((_, error)) => {
                    let n = failing.entry(shard).or_default();
                    *n += 1;
                    out.push(FailedShard {
                        shard,
                        runs_in_a_row: *n,
                        error: error.clone(),
                    });
                }
                None => {
                    failing.remove(&shard);
                }
            }
        }
        out
    }

    fn out_of_time(&self, deadline: Option<Timestamp>, reserve: Duration) -> bool {
        deadline.is_some_and(|d| self.ports.clock().now().plus(reserve) >= d)
    }

    /// Items the index holds but nobody can schedule leave it as `invalid`, each on its own:
    /// one bad item never blocks or delays another.
    async fn quarantine(&self, items: &[(String, String)], report: &mut RunReport) {
        let store = self.ports.reminders();
        let results: Vec<Result<Marked, PortError>> = stream::iter(items)
            .map(|(key, reason)| async move {
                tracing::warn!(reminder_id = %key, invalid_reason = %reason, "quarantined: cannot be scheduled");
                store.quarantine(key, reason).await
            })
            .buffered(MARK_CONCURRENCY)
            .collect()
            .await;
        for result in results {
            report.requests.writes += 1;
            match result {
                Ok(Marked::Marked) => report.quarantined += 1,
                Ok(_) => report.changed += 1,
                Err(e) => {
                    report.mark_failed += 1;
                    tracing::warn!(error = %e, "quarantine failed; tried again next run");
                }
            }
        }
    }

    /// Past `fresh_until` before it was ever enqueued: expired, never sent. The reminder is
    /// marked first, conditional on the version the scan read: an edit that landed since
    /// (a reschedule, more freshness) wins, and nothing is written on the ledger for it.
    /// Then each delivery is expired on the ledger (so `remind show`, the API and the outcome
    /// events tell it), and only then does the reminder leave the due index: a run that stops
    /// in between leaves it indexed as `expiring`, and the next run finishes it.
    async fn expire(&self, stale: &[DueReminder], report: &mut RunReport) {
        let results: Vec<(usize, dispatch::MarkOutcome)> = stream::iter(stale)
            .map(|r| async move {
                if !r.expiring {
                    match self.mark(r, ReminderStatus::Expired).await {
                        dispatch::MarkOutcome::Marked => {}
                        other => return (0, other),
                    }
                }
                let written = self.expire_deliveries(r).await;
                match written {
                    Ok(n) => (n + 1, self.unindex_expired(r).await),
                    Err(n) => (n, dispatch::MarkOutcome::Failed),
                }
            })
            .buffered(MARK_CONCURRENCY)
            .collect()
            .await;
        for (ledger_writes, outcome) in results {
            report.requests.writes += 1 + ledger_writes as u32;
            match outcome {
                dispatch::MarkOutcome::Marked => report.expired += 1,
                dispatch::MarkOutcome::Changed => report.changed += 1,
                dispatch::MarkOutcome::Failed => report.mark_failed += 1,
            }
        }
    }

    /// An expired reminder whose deliveries the ledger now calls expired leaves the index.
    async fn unindex_expired(&self, r: &DueReminder) -> dispatch::MarkOutcome {
        let store = self.ports.reminders();
        match store.quarantine(r.reminder_id.as_str(), "expired").await {
            // Settled items only leave the index (their status stays `expired`).
            Ok(_) => dispatch::MarkOutcome::Marked,
            Err(e) => {
                tracing::warn!(reminder_id = %r.reminder_id, error = %e, "an expired reminder could not leave the index; finished next run");
                dispatch::MarkOutcome::Failed
            }
        }
    }
}

impl<P: Ports> Scheduler<P> {
    /// The ledger's `expired` for each channel of a reminder expiring unsent; the number of
    /// writes tried, as `Err` when one failed.
    async fn expire_deliveries(&self, r: &DueReminder) -> Result<usize, usize> {
        let now = self.ports.clock().now();
        let mut tried = 0;
        for &channel in &r.channels {
            let ctx = crate::ledger::Ctx {
                key: crate::domain::DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel),
                now,
                expires_at: self.cfg.retention.expires_at(r.fresh_until),
                origin: Some(crate::ledger::Origin {
                    reminder_id: r.reminder_id.clone(),
                    subscriber_id: r.subscriber_id.clone(),
                    channel,
                    fallback_from: None,
                    chain_head: false,
                    chain: Vec::new(),
                    unknown: Default::default(),
                }),
            };
            tried += 1;
            if let Err(e) = crate::delivery::expire_unsent(self.ports.ledger(), &ctx).await {
                tracing::warn!(reminder_id = %r.reminder_id, error = %e, "expiring a delivery failed; tried again next run");
                return Err(tried);
            }
        }
        Ok(tried)
    }
}

/// The scheduler expires only what every clock within the margin calls stale; one too close
/// to call is enqueued, and the consumer holds it until it is surely stale (docs/design.md, "Clock
/// margin").
fn surely_stale(fresh_until: Timestamp, now: Timestamp) -> bool {
    use crate::domain::reminder::{freshness, Freshness};
    freshness(fresh_until, now) == Freshness::Stale
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
