//! Fan-out: reminders go out in groups whose messages make at most one batch of ten per
//! channel; a few groups run at a time. A group sends its batches (retrying only the failed
//! entries), then marks each of its reminders enqueued as soon as all that reminder's
//! messages went out. No group starts unless the time left covers the slowest group so far
//! plus the margin, so what a run sends, it marks: a later run never re-sends it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::future::join_all;
use futures::stream::{FuturesUnordered, StreamExt};

use super::{delay_secs, RunReport, Scheduler};
use crate::clock::{Clock, Timestamp};
use crate::domain::{
    AddressHash, Channel, DeliveryMessage, ReminderId, ReminderStatus, SuppressionKey,
};
use crate::ports::queue::MAX_BATCH;
use crate::ports::{DeliveryQueue, DueReminder, Marked, OutgoingMessage, Ports, ReminderStore};

pub(super) enum MarkOutcome {
    Marked,
    /// Edited, cancelled or gone since the scan.
    Changed,
    Failed,
}

/// What one group did.
#[derive(Default)]
struct Group {
    took: Duration,
    messages_sent: u32,
    send_batches: u32,
    writes: u32,
    enqueued: Vec<(ReminderId, Timestamp)>,
    send_failed: u32,
    changed: u32,
    mark_failed: u32,
}

/// Split reminders, in order, into groups of at most one batch per channel.
fn groups(live: &[DueReminder]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut counts) = (0, BTreeMap::<Channel, usize>::new());
    for (i, r) in live.iter().enumerate() {
        let full = r
            .channels
            .iter()
            .any(|c| counts.get(c).copied().unwrap_or(0) >= MAX_BATCH);
        if full {
            out.push(start..i);
            (start, counts) = (i, BTreeMap::new());
        }
        for c in &r.channels {
            *counts.entry(*c).or_default() += 1;
        }
    }
    if start < live.len() {
        out.push(start..live.len());
    }
    out
}

/// The message the scheduler enqueues for `channel` of `r`: a channel the reminder lists alone
/// at its first version is marked sole, with its address's keyed hash under `key` when given
/// ([`DeliveryMessage::sole`]: the consumer's one read).
pub fn message_for(
    r: &DueReminder,
    channel: Channel,
    key: Option<&SuppressionKey>,
) -> DeliveryMessage {
    let msg = DeliveryMessage::new(
        r.reminder_id.clone(),
        r.subscriber_id.clone(),
        channel,
        r.payload_version,
        r.due_at,
        r.fresh_until,
    );
    match r.sole(channel) {
        Some(address) => msg.sole(key.map(|k| AddressHash::of(k, address))),
        None => msg,
    }
}

impl<P: Ports> Scheduler<P> {
    /// The key a run hashes sole channels' addresses with: `None` when none is configured,
    /// or when it cannot be read now (logged; those messages then carry no hash, and the
    /// consumer reads the reminder first, as for any message without one).
    pub(super) async fn message_key(&self) -> Option<SuppressionKey> {
        let source = self.suppression_key.as_ref()?;
        match source.get().await {
            Ok(key) => Some(key),
            Err(e) => {
                tracing::warn!(error = %e, "suppression key unavailable: this run's messages carry no address hash (two reads each)");
                None
            }
        }
    }

    pub(super) async fn dispatch(
        &self,
        live: &[DueReminder],
        key: Option<&SuppressionKey>,
        deadline: Option<Timestamp>,
        report: &mut RunReport,
    ) {
        let ranges = groups(live);
        let mut done: Vec<Option<Group>> = (0..ranges.len()).map(|_| None).collect();
        let mut in_flight = FuturesUnordered::new();
        let (mut next, mut slowest, mut stopped) = (0, Duration::ZERO, false);
        let mut finished = 0;
        loop {
            while !stopped && next < ranges.len() && self.may_start(in_flight.len(), finished) {
                // Room for this group and those in flight, each as slow as the slowest yet.
                let k = u32::try_from(in_flight.len()).unwrap_or(u32::MAX);
                let reserve = self.cfg.deadline_margin + slowest * (k + 1);
                if self.out_of_time(deadline, reserve) {
                    stopped = true;
                    break;
                }
                let i = next;
                let group = &live[ranges[i].clone()];
                in_flight.push(async move { (i, self.group(group, key).await) });
                next += 1;
            }
            let Some((i, group)) = in_flight.next().await else {
                break;
            };
            slowest = slowest.max(group.took);
            finished += 1;
            done[i] = Some(group);
        }
        report.stopped_at_deadline |= stopped;
        // Groups never started stay in the index for the next run.
        let not_started: usize = ranges[next..].iter().map(|r| r.len()).sum();
        report.send_failed += u32::try_from(not_started).unwrap_or(u32::MAX);
        for g in done.into_iter().flatten() {
            report.messages_sent += g.messages_sent;
            report.requests.send_batches += g.send_batches;
            report.requests.writes += g.writes;
            report.enqueued += u32::try_from(g.enqueued.len()).unwrap_or(u32::MAX);
            report.enqueued_ids.extend(g.enqueued);
            report.send_failed += g.send_failed;
            report.changed += g.changed;
            report.mark_failed += g.mark_failed;
        }
    }

    /// The first group runs alone, to measure how long one takes; then up to
    /// `send_concurrency` at once.
    fn may_start(&self, in_flight: usize, finished: usize) -> bool {
        let limit = if finished == 0 {
            1
        } else {
            self.cfg.send_concurrency
        };
        in_flight < limit
    }

    /// Send one group's messages, one batch per channel at once, then mark each reminder
    /// whose messages all went out. A channel the reminder lists alone goes marked sole, with
    /// its address's keyed hash when `key` is given ([`DeliveryMessage::sole`]).
    async fn group(&self, rs: &[DueReminder], key: Option<&SuppressionKey>) -> Group {
        let clock = self.ports.clock();
        let start = clock.now();
        let mut per_channel: BTreeMap<Channel, Vec<(usize, OutgoingMessage)>> = BTreeMap::new();
        for (i, r) in rs.iter().enumerate() {
            for &channel in &r.channels {
                let msg = message_for(r, channel, key);
                let entry = OutgoingMessage {
                    entry_id: per_channel.get(&channel).map_or(0, Vec::len).to_string(),
                    body: msg.encode(),
                    // Set at send time (see `send_batch`).
                    delay_secs: 0,
                };
                per_channel.entry(channel).or_default().push((i, entry));
            }
        }
        let mut g = Group::default();
        let sent = join_all(
            per_channel
                .into_iter()
                .map(|(channel, batch)| self.send_batch(channel, batch, rs)),
        )
        .await;
        let mut lost = BTreeSet::new();
        for (lost_here, sent_here, batches) in sent {
            lost.extend(lost_here);
            g.messages_sent += sent_here;
            g.send_batches += batches;
        }
        g.send_failed = u32::try_from(lost.len()).unwrap_or(u32::MAX);
        let ready: Vec<&DueReminder> = (0..rs.len())
            .filter(|i| !lost.contains(i))
            .map(|i| &rs[i])
            .collect();
        let marks = join_all(ready.iter().map(|r| self.mark(r, ReminderStatus::Enqueued))).await;
        for (r, outcome) in ready.into_iter().zip(marks) {
            g.writes += 1;
            match outcome {
                MarkOutcome::Marked => g.enqueued.push((r.reminder_id.clone(), r.due_at)),
                MarkOutcome::Changed => g.changed += 1,
                MarkOutcome::Failed => g.mark_failed += 1,
            }
        }
        g.took = clock.now().since(start);
        g
    }

    /// One batch of at most ten, retrying only the failed entries (an entry SQS blames on
    /// the sender is not retried). Returns the reminders (indices into the group) whose
    /// message never went out, the messages sent and the requests made.
    async fn send_batch(
        &self,
        channel: Channel,
        batch: Vec<(usize, OutgoingMessage)>,
        rs: &[DueReminder],
    ) -> (Vec<usize>, u32, u32) {
        let (mut pending, mut lost, mut sent, mut requests) = (batch, Vec::new(), 0, 0);
        for attempt in 0..=self.cfg.send_retries {
            if pending.is_empty() {
                break;
            }
            // DelaySeconds from the moment of sending, so time spent scanning is not added.
            let now = self.ports.clock().now();
            let outgoing: Vec<OutgoingMessage> = pending
                .iter()
                .map(|(i, m)| OutgoingMessage {
                    delay_secs: delay_secs(rs[*i].due_at, now),
                    ..m.clone()
                })
                .collect();
            requests += 1;
            let failures = match self.ports.queue().send_batch(channel, &outgoing).await {
                Ok(failures) => failures,
                Err(e) => {
                    tracing::warn!(%channel, error = %e, attempt, "send batch failed");
                    if !e.is_retryable() {
                        break;
                    }
                    continue;
                }
            };
            sent += u32::try_from(outgoing.len() - failures.len()).unwrap_or(0);
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
        (lost, sent, requests)
    }

    /// Conditional on the version taken; a failure is counted, not fatal (the reminder stays
    /// in the index and is taken again next run).
    pub(super) async fn mark(&self, r: &DueReminder, to: ReminderStatus) -> MarkOutcome {
        let store = self.ports.reminders();
        match store.mark(&r.reminder_id, r.payload_version, to).await {
            Ok(Marked::Marked) => MarkOutcome::Marked,
            Ok(_) => MarkOutcome::Changed,
            Err(e) => {
                tracing::warn!(reminder_id = %r.reminder_id, error = %e, "mark failed; taken again next run");
                MarkOutcome::Failed
            }
        }
    }
}
