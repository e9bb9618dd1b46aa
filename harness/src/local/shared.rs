//! What the loops of one local run share: its report, whether to stop, and what it left in
//! flight (the holds it made, each channel's mapping at work).

use super::*;

/// Shared by the loops of one run: the report, and whether to stop.
pub(super) struct Shared {
    pub(super) report: std::sync::Mutex<LocalReport>,
    pub(super) stop: std::sync::atomic::AtomicBool,
    /// Messages this run's consumer held (their visibility moved out), by message id, with
    /// when they come back: a message held past the idle horizon (quiet hours, a long
    /// backoff) is no work for an idle run to wait for.
    pub(super) holds: std::sync::Mutex<PerChannel<std::collections::HashMap<String, Timestamp>>>,
    /// Until when messages in flight that this run did not take are waited for: the start
    /// plus the idle horizon. Those are held by an earlier run (quiet hours, a backoff) or a
    /// worker that stopped, and SQS does not tell a client when they come back: a backoff
    /// shorter than the horizon comes back and is taken; waiting longer would wait out quiet
    /// hours. The summary names those still in flight.
    pub(super) others_waited_until: Timestamp,
    /// Each channel's mapping while it receives and works a batch: busy whatever the queue says.
    pub(super) at_work: PerChannel<std::sync::atomic::AtomicBool>,
}

impl Shared {
    pub(super) fn report(&self) -> std::sync::MutexGuard<'_, LocalReport> {
        self.report.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub(super) fn stopped(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::SeqCst)
    }
    pub(super) fn halt(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    pub(super) fn holds(
        &self,
    ) -> std::sync::MutexGuard<'_, PerChannel<std::collections::HashMap<String, Timestamp>>> {
        self.holds.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// What a batch did to its messages: held ones come back later, others are gone or back.
    /// `visibility_secs`: what a message left in flight (a failed record, a lease lost) waits
    /// before it is visible again.
    pub(super) fn note(
        &self,
        channel: Channel,
        records: &[reminders_core::consumer::RecordReport],
        now: Timestamp,
        visibility_secs: u32,
    ) {
        use reminders_core::consumer::Action;
        let mut holds = self.holds();
        let held = holds.get_mut(channel);
        for r in records {
            let secs = match r.action {
                Action::Hold { secs } => secs,
                Action::Retry | Action::Leave => visibility_secs,
                Action::Ack | Action::Reenqueued | Action::Released => {
                    held.remove(&r.message_id);
                    continue;
                }
            };
            let back = now.plus(Duration::from_secs(u64::from(secs)));
            held.insert(r.message_id.clone(), back);
        }
    }
    /// This run's holds on `channel` that come back after `after`.
    pub(super) fn holds_after(&self, channel: Channel, after: Timestamp) -> Vec<Timestamp> {
        let holds = self.holds();
        holds
            .get(channel)
            .values()
            .copied()
            .filter(|t| *t > after)
            .collect()
    }
    /// Whether `channel` has work for an idle run to wait for at `now`, with `in_flight`
    /// messages in flight.
    pub(super) fn busy(
        &self,
        channel: Channel,
        in_flight: u64,
        now: Timestamp,
        horizon: Timestamp,
    ) -> bool {
        if self
            .at_work
            .get(channel)
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return true;
        }
        let ours = self.holds_after(channel, now);
        // One of this run's messages comes back within the horizon.
        if ours.iter().any(|back| *back <= horizon) {
            return true;
        }
        // In flight and not this run's: held before the run started (or by another consumer),
        // waited for one horizon.
        let others = in_flight.saturating_sub(u64::try_from(ours.len()).unwrap_or(u64::MAX));
        others > 0 && now < self.others_waited_until
    }
    /// What an idle stop leaves pending on each channel, once every loop has stopped: this
    /// run's holds still to come back (with the first one's return), and the other messages
    /// in flight (held before the run started, or by another consumer).
    pub(super) fn held(&self, now: Timestamp, in_flight: &PerChannel<u64>) -> Vec<Held> {
        let mut out = Vec::new();
        for channel in Channel::ALL {
            let ours = self.holds_after(channel, now);
            let n = u64::try_from(ours.len()).unwrap_or(u64::MAX);
            if let Some(first) = ours.into_iter().min() {
                out.push(Held {
                    channel,
                    messages: u32::try_from(n).unwrap_or(u32::MAX),
                    first_back: Some(first),
                });
            }
            let others = in_flight.get(channel).saturating_sub(n);
            if others > 0 {
                out.push(Held {
                    channel,
                    messages: u32::try_from(others).unwrap_or(u32::MAX),
                    first_back: None,
                });
            }
        }
        out
    }
}
