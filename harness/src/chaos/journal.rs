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

use reminders_core::clock::Timestamp;
use reminders_core::domain::{Channel, DeadReason, DeliveryKey, Preferences, SubscriberId};
use reminders_core::ledger::{DeliveryRecord, Status};
use reminders_core::policy::OutcomeClass;
use reminders_core::ports::faults::lock;

#[derive(Debug, Default, Clone)]
pub struct KeyFacts {
    /// Provider calls that spent an attempt (not throttled).
    pub attempts: u32,
    /// Times the provider took the message in (what the recipient would see, before any
    /// deduplication on the idempotency key).
    pub acceptances: u32,
    pub delivered_at: Option<Timestamp>,
    pub cancelled_at: Option<Timestamp>,
    /// When an operator's cancel was answered "cancelled" for this delivery: any send that
    /// starts later breaks the promise, whatever the ledger says.
    pub cancel_answered_at: Option<Timestamp>,
    /// Times a message with this key was received from its queue.
    pub receives: u32,
    /// The earliest the provider asked to be called again for this key, once the system
    /// learned it (a throttled deferral landed on the ledger after the 429). A 429 whose
    /// worker stopped before recording anything is one the system never heard.
    pub retry_after: Option<Timestamp>,
    /// The Retry-After of the latest 429, until a throttled deferral records it.
    pub heard_retry_after: Option<Timestamp>,
    /// When it died, each time (as the ledger states it: what a DLQ copy must state).
    pub deaths: Vec<Timestamp>,
    /// `dead → ready` transitions (each grants a fresh budget).
    pub redrives: u32,
    /// Redrives out of `dead/ambiguous` (each an operator accepting a possible second send).
    pub ambiguous_redrives: u32,
    /// Attempts since the last redrive, and the most an earlier budget epoch spent
    /// ([`KeyFacts::budget_spent`] is the most of all).
    pub epoch_attempts: u32,
    pub max_epoch_attempts: u32,
    /// Claims to make the DLQ copy of the current death (a second copy is benign only when a
    /// second claim was made: the first claimer stopped between copying and recording it).
    pub copy_claims: u32,
    /// Permanent answers from the provider (what justifies `dead/rejected`).
    pub permanent_answers: u32,
    /// Endings the system had no reason for (a death without its cause), as they landed.
    pub unjustified: Vec<String>,
    pub stale_sends: u32,
    pub early_sends: u32,
    pub sends_after_cancel: u32,
    pub sends_after_delivered: u32,
    /// The order number of the latest claim that landed (a claim or a takeover): the send
    /// that follows it is the claimer's.
    pub claimed: Option<u64>,
    /// The order number of its first claim: where a fallback order starts to bind it.
    pub first_claim: Option<u64>,
    /// Sends to a channel the subscriber had opted out of before the claim, and still had
    /// at the send (an opt-out lifted in between may have been read: allowed).
    pub sent_while_opted_out: u32,
    /// Sends at an instant inside the channel's quiet hours as they stood at the claim, and
    /// in every version of the preferences written since.
    pub sent_in_quiet_hours: u32,
    /// Times the delivery was held for its channel's quiet hours.
    pub quiet_holds: u32,
    /// SMS sends to a number outside the allowed calling codes ([`Journal::sent_abroad`]).
    pub sent_abroad: u32,
    /// Failed breaker probes (provider calls the budget does not count), in all and in
    /// this budget epoch.
    pub probe_calls: u32,
    pub epoch_probes: u32,
    /// The provider's last answer for this key was a 5xx, while its partition's breaker was
    /// open (every worker could know the provider was down).
    pub last_failure_while_open: bool,
    /// Known once the provider answered a failure.
    pub channel: Option<reminders_core::domain::Channel>,
    /// ... and the breaker was still open when the delivery died of spent attempts.
    pub died_while_open: bool,
    /// Every provider call, in order: what the checker needs to say whether one may have
    /// reached the person before another channel's.
    pub sends: Vec<SendFact>,
    /// Writes into `expired` (from another status), with their order number.
    pub expiries: Vec<(u64, Timestamp)>,
    /// A death of this delivery handed the reminder on (`fallback_to`).
    pub fell_back: bool,
}

impl KeyFacts {
    /// What a reader of a finding needs, in words: the receives, the provider calls and how
    /// each was answered, and the deaths, redrives and endings, leaving out what is zero.
    pub fn summary(&self) -> String {
        let sends: Vec<String> = self
            .sends
            .iter()
            .map(|s| {
                let answer = match s.reached {
                    Some(true) => "accepted or answer lost",
                    Some(false) => "refused",
                    None => "no answer",
                };
                format!("{} {answer}", s.at.to_rfc3339())
            })
            .collect();
        let mut parts = vec![
            format!("received {} time(s)", self.receives),
            format!("provider calls [{}]", sends.join(", ")),
        ];
        let times = |v: &[Timestamp]| {
            v.iter()
                .map(|t| t.to_rfc3339())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.deaths.is_empty() {
            parts.push(format!("died at [{}]", times(&self.deaths)));
        }
        let counts = [
            ("attempts", self.attempts),
            ("acceptances", self.acceptances),
            ("redrives", self.redrives),
            ("permanent answers", self.permanent_answers),
            ("stale sends", self.stale_sends),
            ("early sends", self.early_sends),
            ("sends after cancel", self.sends_after_cancel),
            ("sends after delivered", self.sends_after_delivered),
            ("quiet holds", self.quiet_holds),
        ];
        for (name, n) in counts.into_iter().filter(|(_, n)| *n > 0) {
            parts.push(format!("{name} {n}"));
        }
        let instants = [
            ("delivered at", self.delivered_at),
            ("cancelled at", self.cancelled_at),
            ("cancel answered at", self.cancel_answered_at),
            ("retry after", self.retry_after),
        ];
        for (name, at) in instants {
            if let Some(at) = at {
                parts.push(format!("{name} {}", at.to_rfc3339()));
            }
        }
        if self.fell_back {
            parts.push("handed the reminder on".into());
        }
        for u in &self.unjustified {
            parts.push(format!("unjustified: {u}"));
        }
        parts.join("; ")
    }
}

/// One provider call for a key.
#[derive(Debug, Clone, Copy)]
pub struct SendFact {
    /// Its order among claims, preference writes and acknowledgments.
    pub seq: u64,
    pub at: Timestamp,
    /// The claim it was made under (as the journal last saw one land).
    pub claim: Option<u64>,
    /// `Some(false)` when the provider answered a definite refusal (a 429, a 5xx, a
    /// permanent reject, a 410); `Some(true)` when it accepted or the answer was lost;
    /// `None` when the call never got an answer (its invocation stopped): may have been sent.
    pub reached: Option<bool>,
}

impl SendFact {
    /// Whether this call may have reached the person, as the system can know.
    pub fn may_have_reached(&self) -> bool {
        self.reached != Some(false)
    }
}

impl KeyFacts {
    /// The most attempts any budget epoch charged: provider calls less failed probes.
    pub fn budget_spent(&self) -> u32 {
        let epoch = self.epoch_attempts.saturating_sub(self.epoch_probes);
        self.max_epoch_attempts.max(epoch)
    }
}

/// Every channel's provider is one gate partition (the journal reads the true gate by it).
pub const PARTITION: &str = "chaos";

/// One write of a subscriber's preferences, in landing order.
#[derive(Debug, Clone)]
pub struct PrefsWrite {
    pub seq: u64,
    pub prefs: Preferences,
}

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
}

impl Journal {
    pub fn new(gate: Arc<reminders_core::ports::MemoryGate>) -> Self {
        Self {
            keys: Mutex::default(),
            gone: Mutex::default(),
            prefs: Mutex::default(),
            seq: AtomicU64::new(0),
            gate,
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
            k.sent_while_opted_out += u32::from(opted_out);
            k.sent_in_quiet_hours += u32::from(quiet);
            k.channel = Some(channel);
            k.stale_sends += u32::from(now > fresh_until);
            // Before the provider's Retry-After by more than two workers' clocks can disagree:
            // the worker that heard the 429 closed the gate on its clock, the one sending reads
            // it on its own (docs/design.md, "Clock margin").
            let early = |at: Timestamp| now.plus(super::clocks_disagree_by()) < at;
            k.early_sends += u32::from(k.retry_after.is_some_and(early));
            let after_cancel = k.cancelled_at.is_some() || k.cancel_answered_at.is_some();
            k.sends_after_cancel += u32::from(after_cancel);
            k.sends_after_delivered += u32::from(k.delivered_at.is_some());
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
        self.with(key, |k| k.sent_abroad += 1)
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
            k.attempts += 1;
            k.epoch_attempts += 1;
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
                k.probe_calls += 1;
                k.epoch_probes += 1;
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
                k.redrives += 1;
                k.max_epoch_attempts = k.budget_spent();
                k.epoch_attempts = 0;
                k.epoch_probes = 0;
                let reason = before.and_then(DeliveryRecord::dead_reason);
                k.ambiguous_redrives += u32::from(reason == Some(DeadReason::Ambiguous));
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
