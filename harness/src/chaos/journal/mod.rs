//! What the checker watches, per delivery key, as it happens: every provider call (when it
//! started, what it answered, whether the provider accepted it), every ledger write that
//! landed, and the violations seen at the moment they happen (a send after the ledger recorded
//! the delivery or its cancel, after `fresh_until`, before a Retry-After, to an opted-out
//! channel or inside quiet hours that were in force at the delivery's claim).
//!
//! Claims and preference writes are numbered in the order they land (a world runs on one
//! thread, and neither memory port yields between its write and the journal's note): the
//! claim is the point the consumer orders preferences by, as it orders cancels.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reminders_core::clock::Timestamp;
use reminders_core::domain::{Channel, DeadReason, DeliveryKey, Preferences, SubscriberId};
use reminders_core::ledger::{DeliveryRecord, Status};
use reminders_core::policy::OutcomeClass;
use reminders_core::sync::lock;

mod facts;

pub use facts::{KeyFacts, PrefsWrite, SendFact, PARTITION};

pub struct Journal {
    keys: Mutex<BTreeMap<DeliveryKey, KeyFacts>>,
    /// Channels of a subscriber (whose reminders share its addresses) a provider answered
    /// 410 for.
    gone: Mutex<std::collections::BTreeSet<(SubscriberId, Channel)>>,
    /// Every preferences write, per subscriber, oldest first.
    prefs: Mutex<BTreeMap<SubscriberId, Vec<PrefsWrite>>>,
    /// Orders claims and preference writes.
    seq: AtomicU64,
    /// The world's gate as it truly is: whether a partition's breaker is open.
    gate: Arc<reminders_core::ports::MemoryGate>,
    /// How far apart two workers' clocks may be in this world: each is off the world's by up
    /// to the run's skew, either way.
    disagree: Duration,
}

impl Journal {
    /// A journal of a world whose workers' clocks may disagree by up to `disagree`.
    pub fn new(gate: Arc<reminders_core::ports::MemoryGate>, disagree: Duration) -> Self {
        Self {
            keys: Mutex::default(),
            gone: Mutex::default(),
            prefs: Mutex::default(),
            seq: AtomicU64::new(0),
            gate,
            disagree,
        }
    }

    /// The next order number (claims, preference writes, provider calls, expiries and the
    /// API's acknowledgments share one order).
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    /// A subscriber's preferences were replaced now (right after the write landed).
    pub fn preferences_written(&self, subscriber: &SubscriberId, prefs: &Preferences) {
        let write = PrefsWrite {
            seq: self.next_seq(),
            prefs: prefs.clone(),
        };
        lock(&self.prefs)
            .entry(subscriber.clone())
            .or_default()
            .push(write);
    }

    /// Every subscriber's preference writes, oldest first.
    pub fn preference_writes(&self) -> BTreeMap<SubscriberId, Vec<PrefsWrite>> {
        lock(&self.prefs).clone()
    }

    /// The versions of `subscriber`'s preferences a consumer that claimed at `claim` may have
    /// read before a send now: the one in force at the claim (`None` if none was written yet)
    /// and each written since.
    fn readable_since(&self, subscriber: &SubscriberId, claim: u64) -> Vec<Option<Preferences>> {
        let all = lock(&self.prefs);
        let writes = all.get(subscriber).map_or(&[][..], Vec::as_slice);
        let at_claim = writes.iter().rev().find(|w| w.seq < claim);
        let since = writes.iter().filter(|w| w.seq > claim);
        std::iter::once(at_claim.map(|w| w.prefs.clone()))
            .chain(since.map(|w| Some(w.prefs.clone())))
            .collect()
    }

    fn breaker_open(&self, channel: Option<reminders_core::domain::Channel>) -> bool {
        channel.is_some_and(|c| {
            let p = reminders_core::ports::GatePartition::new(c, PARTITION);
            self.gate.peek(&p).breaker.is_some()
        })
    }

    pub fn facts(&self) -> BTreeMap<DeliveryKey, KeyFacts> {
        lock(&self.keys).clone()
    }

    fn with<R>(&self, key: &DeliveryKey, f: impl FnOnce(&mut KeyFacts) -> R) -> R {
        f(lock(&self.keys).entry(key.clone()).or_default())
    }

    /// A provider call starts now, for a reminder of `subscriber` fresh until `fresh_until`.
    pub fn send_started(
        &self,
        key: &DeliveryKey,
        channel: Channel,
        subscriber: Option<&SubscriberId>,
        now: Timestamp,
        fresh_until: Timestamp,
    ) -> usize {
        let claimed = self.with(key, |k| k.claimed);
        let seq = self.next_seq();
        // Judged only when every version the consumer may have read says so: a change after
        // the claim is in flight, as a cancel after the claim is.
        let (opted_out, quiet) = match (subscriber, claimed) {
            (Some(s), Some(claim)) => {
                let versions = self.readable_since(s, claim);
                let every = |f: &dyn Fn(&Preferences) -> bool| {
                    versions.iter().all(|v| v.as_ref().is_some_and(f))
                };
                (
                    every(&|p| p.opted_out.contains(&channel)),
                    every(&|p| p.quiet_hours.get(&channel).is_some_and(|q| q.contains(now))),
                )
            }
            _ => (false, false),
        };
        self.with(key, |k| {
            k.broken.while_opted_out += u32::from(opted_out);
            k.broken.in_quiet_hours += u32::from(quiet);
            k.channel = Some(channel);
            k.broken.stale += u32::from(now > fresh_until);
            // Before the provider's Retry-After by more than two workers' clocks can disagree:
            // the worker that heard the 429 closed the gate on its clock, the one sending reads
            // it on its own (docs/design.md, "Clock margin").
            let early = |at: Timestamp| now.plus(self.disagree) < at;
            k.broken.early += u32::from(k.retry_after.is_some_and(early));
            let after_cancel = k.cancelled_at.is_some() || k.cancel_answered_at.is_some();
            k.broken.after_cancel += u32::from(after_cancel);
            k.broken.after_delivered += u32::from(k.delivered_at.is_some());
            k.sends.push(SendFact {
                seq,
                at: now,
                claim: claimed,
                reached: None,
            });
            k.sends.len() - 1
        })
    }

    pub fn sent_abroad(&self, key: &DeliveryKey) {
        self.with(key, |k| k.broken.abroad += 1)
    }

    /// The provider answered call `n` of `key`: whether it may have reached the person.
    pub fn answered(&self, key: &DeliveryKey, n: usize, reached: bool) {
        self.with(key, |k| {
            if let Some(s) = k.sends.get_mut(n) {
                s.reached = Some(reached);
            }
        });
    }

    /// The provider answered 410 for `subscriber`'s address on `channel`.
    pub fn gone(&self, subscriber: Option<&SubscriberId>, channel: Channel) {
        if let Some(s) = subscriber {
            lock(&self.gone).insert((s.clone(), channel));
        }
    }

    /// Whether a provider ever answered 410 for that address.
    pub fn was_gone(&self, subscriber: &SubscriberId, channel: Channel) -> bool {
        lock(&self.gone).contains(&(subscriber.clone(), channel))
    }

    pub fn gone_answers(&self) -> u64 {
        lock(&self.gone).len() as u64
    }

    /// A message with this key was received from its channel's queue.
    pub fn received(&self, key: &DeliveryKey) {
        self.with(key, |k| k.receives += 1);
    }

    /// An operator's cancel answered that this delivery is cancelled (or already over).
    pub fn cancel_answered(&self, key: &DeliveryKey, now: Timestamp) {
        self.with(key, |k| {
            k.cancel_answered_at.get_or_insert(now);
        });
    }

    pub fn attempt(&self, key: &DeliveryKey) {
        self.with(key, |k| {
            // Until this call's answer is known to be a 5xx.
            k.last_failure_while_open = false;
            k.budget.attempts += 1;
            k.budget.epoch_attempts += 1;
        });
    }

    pub fn permanent(&self, key: &DeliveryKey) {
        self.with(key, |k| k.permanent_answers += 1);
    }

    pub fn accepted(&self, key: &DeliveryKey) {
        self.with(key, |k| k.acceptances += 1);
    }

    /// The provider answered a failure (5xx) for `key` on `channel`.
    pub fn failed(&self, key: &DeliveryKey, channel: reminders_core::domain::Channel) {
        let open = self.breaker_open(Some(channel));
        self.with(key, |k| {
            k.last_failure_while_open = open;
            k.channel = Some(channel);
        });
    }

    pub fn throttled(&self, key: &DeliveryKey, until: Timestamp) {
        self.with(key, |k| k.heard_retry_after = Some(until));
    }

    /// The item was deleted: a claim its worker undid before anything was sent (the
    /// one-read path's give-back of an item its claim created). Never claimed, as far as
    /// anyone can tell.
    pub(super) fn removed(&self, key: &DeliveryKey) {
        self.with(key, |k| {
            k.claimed = None;
            k.first_claim = None;
        });
    }

    pub(super) fn landed(
        &self,
        before: Option<&DeliveryRecord>,
        after: &DeliveryRecord,
        now: Timestamp,
    ) {
        let from = before.map_or(Status::Scheduled, DeliveryRecord::status);
        let to = after.status();
        // A claim, or a takeover under a new lease.
        let claim = to == Status::Sending
            && (from != Status::Sending
                || before.and_then(DeliveryRecord::lease_token) != after.lease_token());
        let seq = claim.then(|| self.next_seq());
        let expiry = (to == Status::Expired && from != Status::Expired).then(|| self.next_seq());
        self.with(after.key(), |k| {
            if let Some(e) = expiry {
                k.expiries.push((e, now));
            }
            if to == Status::Dead && after.fallback_to().is_some() && !k.fell_back {
                k.fell_back = true;
            }
            if seq.is_some() {
                k.claimed = seq;
                k.first_claim = k.first_claim.or(seq);
            }
            let quiet = after
                .last_error()
                .is_some_and(|e| e.starts_with(reminders_core::ledger::QUIET_HOURS_ERROR));
            if to == Status::Deferred && from == Status::Sending && quiet {
                k.quiet_holds += 1;
            }
            if to == Status::Delivered && k.delivered_at.is_none() {
                k.delivered_at = Some(now);
            }
            if to == Status::Cancelled && k.cancelled_at.is_none() {
                k.cancelled_at = Some(now);
            }
            let throttled = after.last_outcome_class() == Some(OutcomeClass::Throttled);
            if to == Status::Deferred && from == Status::Sending && throttled {
                if let Some(until) = k.heard_retry_after.take() {
                    k.retry_after = Some(k.retry_after.map_or(until, |t| t.max(until)));
                }
            }
            // A failed send the breaker held (a probe, or one that met an open partition) is
            // the outage's call, not the delivery's: the provider saw it; the budget does not
            // count it.
            let probe_held =
                after.last_error() == Some(reminders_core::policy::breaker::HELD_BY_BREAKER);
            // Excused only when the true gate shows the breaker open: a system that labels a
            // failure held while the provider is up has spent an attempt all the same.
            if to == Status::Deferred
                && from == Status::Sending
                && probe_held
                && self.breaker_open(k.channel)
            {
                k.budget.probe_calls += 1;
                k.budget.epoch_probes += 1;
            }
            if to == Status::Dead && from != Status::Dead {
                k.died_while_open = self.breaker_open(k.channel);
                k.deaths.push(after.dead_at().unwrap_or(now));
                k.copy_claims = 0;
                if let Some(why) = unjustified_death(k, after) {
                    k.unjustified.push(why);
                }
            }
            let claimed = after.dlq_copy_claimed_at();
            if to == Status::Dead
                && claimed.is_some()
                && claimed != before.and_then(|b| b.dlq_copy_claimed_at())
            {
                k.copy_claims += 1;
            }
            if from == Status::Dead && to == Status::Ready {
                let reason = before.and_then(DeliveryRecord::dead_reason);
                k.budget.redriven(reason == Some(DeadReason::Ambiguous));
            }
        });
    }
}

/// A death the world gave no cause for: rejected without a permanent answer, attempts or
/// throttles exhausted with budget left, attempts exhausted by a failure the provider answered
/// while its partition's breaker was open and still open at the death (every worker could
/// know the provider was down throughout; a send whose worker died before hearing the answer
/// is the crash's, charged by the ambiguous rule), or a reason no valid reminder in these
/// worlds has.
fn unjustified_death(k: &KeyFacts, dead: &DeliveryRecord) -> Option<String> {
    let within = |used: u32, max: Option<u32>| max.is_some_and(|max| used < max);
    let policy = dead.policy();
    let why = match dead.dead_reason()? {
        DeadReason::Rejected if k.permanent_answers == 0 => "rejected without a permanent answer",
        DeadReason::AttemptsExhausted
            if within(dead.attempt_count(), policy.map(|p| p.max_attempts)) =>
        {
            "attempts_exhausted with attempts left"
        }
        // The outage's failure, not the delivery's: the breaker should have held it.
        DeadReason::AttemptsExhausted
            if k.last_failure_while_open
                && k.died_while_open
                && dead.last_error() != Some(reminders_core::policy::ABANDONED) =>
        {
            "attempts_exhausted by a failure while its partition's breaker was open"
        }
        DeadReason::ThrottleExhausted
            if within(
                dead.throttle_count(),
                policy.map(|p| p.max_throttle_deferrals),
            ) =>
        {
            "throttle_exhausted with throttles left"
        }
        DeadReason::Schema | DeadReason::UnknownReminder | DeadReason::InvalidReminder => {
            "a data error, with valid reminders"
        }
        _ => return None,
    };
    Some(format!("{why} (seq {})", dead.seq()))
}
