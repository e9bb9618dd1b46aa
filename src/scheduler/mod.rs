//! The scheduler run (EventBridge Scheduler, every minute): take due reminders fairly from the
//! sharded due index ([`scan`]), fan each out as one message per channel with `DelaySeconds`
//! for the ones due inside the look-ahead, send in batches of ten retrying only failed
//! entries, and mark a reminder enqueued only when all its messages went out.
//!
//! Idempotent by construction: a double run, or a crash between send and mark, can enqueue a
//! delivery twice, and the ledger makes that one send.

pub mod config;
mod scan;

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

use crate::clock::{ceil_secs, Clock, Timestamp};
use crate::domain::{Channel, DeliveryMessage, ReminderId, ReminderStatus};
use crate::policy::MAX_DELAY_SECS;
use crate::ports::queue::MAX_BATCH;
use crate::ports::{
    DeliveryQueue, DueReminder, Marked, OutgoingMessage, PortError, Ports, ReminderStore,
};
pub use config::SchedulerConfig;

/// DelaySeconds for a message of a reminder due at `due_at`, sent at `now`: whole seconds,
/// rounded up (never early), at most 900.
pub fn delay_secs(due_at: Timestamp, now: Timestamp) -> u32 {
    ceil_secs(due_at.since(now)).min(MAX_DELAY_SECS) as u32
}

/// AWS requests made by a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Requests {
    pub queries: u32,
    pub send_batches: u32,
    pub writes: u32,
}

/// What a run did (the Lambda's output).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunReport {
    pub scanned: u32,
    pub picked: u32,
    pub skipped_over_cap: u32,
    pub enqueued: u32,
    pub messages_sent: u32,
    pub expired: u32,
    /// Reminders left in the index because a message did not go out (retried next run).
    pub send_failed: u32,
    /// Edited or cancelled between the scan and the mark.
    pub changed: u32,
    /// Marks that failed (DynamoDB error): sent but still in the index, so sent again next
    /// run — the ledger makes that one send.
    pub mark_failed: u32,
    pub stopped_at_deadline: bool,
    pub requests: Requests,
    /// Enqueued reminders in the order they were taken.
    #[serde(skip)]
    pub enqueued_ids: Vec<(ReminderId, Timestamp)>,
}

pub struct Scheduler<P: Ports> {
    ports: P,
    cfg: SchedulerConfig,
}

impl<P: Ports> Scheduler<P> {
    pub fn new(ports: P, cfg: SchedulerConfig) -> Self {
        Self { ports, cfg }
    }

    pub fn ports(&self) -> &P {
        &self.ports
    }

    /// One run. `deadline` is the invocation's, if any.
    pub async fn run(&self, deadline: Option<Timestamp>) -> Result<RunReport, PortError> {
        let clock = self.ports.clock();
        let now = clock.now();
        let out_of_time =
            || deadline.is_some_and(|d| clock.now().plus(self.cfg.deadline_margin) >= d);
        let limits = scan::Limits {
            until: now.plus(self.cfg.look_ahead),
            per_subscriber_cap: self.cfg.per_subscriber_cap,
            max_take: self.cfg.max_per_run,
            max_scan: self.cfg.max_scan,
            page_size: self.cfg.page_size,
        };
        let taken = scan::take_due(self.ports.reminders(), &limits, out_of_time).await?;
        let mut report = RunReport {
            scanned: taken.scanned,
            picked: taken.picked.len() as u32,
            skipped_over_cap: taken.skipped_over_cap,
            requests: Requests {
                queries: taken.queries,
                ..Requests::default()
            },
            ..RunReport::default()
        };
        let (stale, live): (Vec<DueReminder>, Vec<DueReminder>) =
            taken.picked.into_iter().partition(|r| now > r.fresh_until);
        for r in &stale {
            if self.mark(r, ReminderStatus::Expired, &mut report).await {
                report.expired += 1;
            }
        }
        let failed = self.send_all(&live, &out_of_time, &mut report).await;
        for r in live.iter().filter(|r| !failed.contains(&r.reminder_id)) {
            if self.mark(r, ReminderStatus::Enqueued, &mut report).await {
                report.enqueued += 1;
                report.enqueued_ids.push((r.reminder_id.clone(), r.due_at));
            }
        }
        report.send_failed = failed.len() as u32;
        tracing::info!(
            scanned = report.scanned,
            enqueued = report.enqueued,
            expired = report.expired,
            skipped_over_cap = report.skipped_over_cap,
            send_failed = report.send_failed,
            "scheduler run"
        );
        Ok(report)
    }

    /// Conditional on the version taken; a failure is counted, not fatal (the reminder stays
    /// in the index and is taken again next run).
    async fn mark(&self, r: &DueReminder, to: ReminderStatus, report: &mut RunReport) -> bool {
        report.requests.writes += 1;
        let marked = self
            .ports
            .reminders()
            .mark(&r.reminder_id, r.payload_version, to)
            .await;
        match marked {
            Ok(Marked::Marked) => true,
            Ok(_) => {
                report.changed += 1;
                false
            }
            Err(e) => {
                report.mark_failed += 1;
                tracing::warn!(reminder_id = %r.reminder_id, error = %e, "mark failed; taken again next run");
                false
            }
        }
    }

    /// Send every message, per channel, oldest first; return the reminders with a message
    /// that did not go out (or was not tried before the deadline).
    async fn send_all(
        &self,
        live: &[DueReminder],
        out_of_time: &impl Fn() -> bool,
        report: &mut RunReport,
    ) -> BTreeSet<ReminderId> {
        let mut per_channel: BTreeMap<Channel, Vec<(usize, OutgoingMessage)>> = BTreeMap::new();
        for (i, r) in live.iter().enumerate() {
            for &channel in &r.channels {
                let msg = DeliveryMessage::new(
                    r.reminder_id.clone(),
                    r.subscriber_id.clone(),
                    channel,
                    r.payload_version,
                    r.due_at,
                    r.fresh_until,
                );
                per_channel.entry(channel).or_default().push((
                    i,
                    OutgoingMessage {
                        entry_id: String::new(),
                        body: msg.encode(),
                        // Set again at send time (see send_chunk).
                        delay_secs: 0,
                    },
                ));
            }
        }
        let mut failed = BTreeSet::new();
        for (channel, messages) in per_channel {
            for chunk in messages.chunks(MAX_BATCH) {
                let lost = if out_of_time() {
                    report.stopped_at_deadline = true;
                    chunk.iter().map(|(i, _)| *i).collect()
                } else {
                    self.send_chunk(channel, chunk, live, report).await
                };
                failed.extend(lost.into_iter().map(|i| live[i].reminder_id.clone()));
            }
        }
        failed
    }

    /// One batch of ten, retrying only the failed entries (an entry SQS blames on the sender
    /// is not retried); returns the reminders (indices) whose message never went out.
    async fn send_chunk(
        &self,
        channel: Channel,
        chunk: &[(usize, OutgoingMessage)],
        live: &[DueReminder],
        report: &mut RunReport,
    ) -> Vec<usize> {
        let mut pending: Vec<(usize, OutgoingMessage)> = chunk
            .iter()
            .enumerate()
            .map(|(n, (i, m))| {
                let mut m = m.clone();
                m.entry_id = n.to_string();
                (*i, m)
            })
            .collect();
        let mut lost = Vec::new();
        for attempt in 0..=self.cfg.send_retries {
            if pending.is_empty() {
                break;
            }
            // DelaySeconds from the moment of sending, so time spent scanning is not added.
            let now = self.ports.clock().now();
            let batch: Vec<OutgoingMessage> = pending
                .iter()
                .map(|(i, m)| OutgoingMessage {
                    delay_secs: delay_secs(live[*i].due_at, now),
                    ..m.clone()
                })
                .collect();
            report.requests.send_batches += 1;
            let failures = match self.ports.queue().send_batch(channel, &batch).await {
                Ok(failures) => failures,
                Err(e) => {
                    tracing::warn!(%channel, error = %e, attempt, "send batch failed");
                    if !e.is_retryable() {
                        break;
                    }
                    continue;
                }
            };
            report.messages_sent += (batch.len() - failures.len()) as u32;
            let failed: BTreeMap<&str, bool> = failures
                .iter()
                .map(|f| (f.entry_id.as_str(), f.sender_fault))
                .collect();
            for f in &failures {
                tracing::warn!(%channel, code = %f.code, sender_fault = f.sender_fault, attempt, "batch entry failed");
            }
            pending.retain(|(i, m)| match failed.get(m.entry_id.as_str()) {
                None => false,
                Some(true) => {
                    lost.push(*i);
                    false
                }
                Some(false) => true,
            });
        }
        lost.extend(pending.iter().map(|(i, _)| *i));
        lost
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn delay_seconds_land_on_the_due_time_never_before() {
        let now = Timestamp::from_millis(1_000_000);
        assert_eq!(delay_secs(now, now), 0);
        assert_eq!(
            delay_secs(Timestamp::from_millis(999_000), now),
            0,
            "already due"
        );
        assert_eq!(delay_secs(now.plus(Duration::from_millis(45_001)), now), 46);
        assert_eq!(delay_secs(now.plus(Duration::from_secs(90)), now), 90);
        assert_eq!(delay_secs(now.plus(Duration::from_secs(2_000)), now), 900);
    }
}
