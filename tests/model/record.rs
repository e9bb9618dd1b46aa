//! What the consumer's record pipeline (`consumer/record/*.rs`) does with each answer: send
//! under a lease it acquired, take over a lapsed one by the ambiguous rule, write the
//! provider's outcome under its lease, reconcile, resolve an abandoned send when cancelling —
//! and whether the record ends by acking its message or holding it (it comes back later).
//! Every decision is the real `policy::decide` / `decide_abandoned`.

use reminders::delivery::state::{Change, LeaseToken, Status, Why};
use reminders::domain::DeadReason;
use reminders::policy::{decide, decide_abandoned, Next, Outcome, OutcomeClass, Spent, ABANDONED};

use crate::fixtures::{at, fresh_until, policy, rng, Rec, LEASE_TICKS, PROVIDER_TIMEOUT, TICK};
use crate::protocol::{Fault, ProtocolModel, State};
use crate::worker::{Lease, Pending, Phase, Then};

/// A write's answer (`delivery::Written`).
pub enum Answer {
    Applied(Rec),
    Refused { current: Option<Rec>, why: Why },
}

/// The provider's answer to a send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sent {
    Delivered,
    /// Failed before the request was acted on: not accepted.
    Transient,
    /// Accepted, then the answer was lost: counts as an acceptance.
    Ambiguous,
}

impl Sent {
    pub const ALL: [Sent; 3] = [Sent::Delivered, Sent::Transient, Sent::Ambiguous];

    fn outcome(self) -> Outcome {
        match self {
            Sent::Delivered => Outcome::Delivered { receipt: None },
            Sent::Transient => Outcome::Transient {
                error: "transient".into(),
            },
            Sent::Ambiguous => Outcome::Ambiguous {
                error: "ambiguous".into(),
            },
        }
    }
}

pub fn answered(m: &ProtocolModel, s: &mut State, w: usize, p: Pending, answer: Answer) {
    let applied = matches!(answer, Answer::Applied(_));
    match (p.then, answer) {
        (Then::Claim(token), Answer::Applied(record)) => {
            s.workers[w] = Phase::Send(Lease { record, token });
        }
        (Then::Claim(token), Answer::Refused { current, why }) => {
            claim_refused(m, s, w, (p.tick, current, why), token);
        }
        (Then::TakeOver(token), Answer::Applied(record)) => match p.change {
            Change::Takeover { .. } => s.workers[w] = Phase::Send(Lease { record, token }),
            // Deferred for the backoff: hold; dead: acked.
            Change::Defer { .. } => s.end(w, true),
            _ => s.end(w, false),
        },
        // Another worker got there first: look again shortly.
        (Then::TakeOver(_), Answer::Refused { .. }) => s.end(w, true),
        (
            Then::Deliver(token),
            Answer::Refused {
                current: Some(dead),
                ..
            },
        ) if dead.status() == Status::Dead => {
            let receipt = None;
            let change = Change::Reconcile { token, receipt };
            s.workers[w] = Phase::Write(Pending::from(dead, change, p.tick, Then::Reconcile));
        }
        (
            Then::Cancel,
            Answer::Refused {
                current: Some(r), ..
            },
        ) if r.status() == Status::Sending => {
            resolve_abandoned(m, s, w, p.tick, r);
        }
        // A retry holds its message; a retry whose lease was taken over acks it.
        (Then::Retry, _) => s.end(w, applied),
        (Then::Release, _) => s.end(w, true),
        (Then::Resolve | Then::BudgetSpent, _) => s.end(w, !applied),
        (
            Then::Deliver(_) | Then::Dead | Then::Reconcile | Then::Cancel,
            Answer::Applied(_) | Answer::Refused { .. },
        ) => s.end(w, false),
    }
}

/// `claim()`'s answer to a refused claim, and `not_ours`.
fn claim_refused(
    m: &ProtocolModel,
    s: &mut State,
    w: usize,
    (tick, current, why): (u8, Option<Rec>, Why),
    token: LeaseToken,
) {
    let Some(cur) = current else {
        return s.invariant_error(w);
    };
    if let Why::BudgetSpent { .. } = why {
        // `die_budget_spent`: no attempt left, dead as `attempts_exhausted`.
        let change = Change::Die {
            token: None,
            reason: DeadReason::AttemptsExhausted,
            spends_attempt: false,
            error: Some("no attempt left in the budget".into()),
        };
        s.ghost.budget_spent_claim = true;
        let pending = Pending::from(cur, change, tick, Then::BudgetSpent);
        s.workers[w] = Phase::Write(pending);
        return;
    }
    match cur.status() {
        Status::Sending if cur.lease_expires_at().is_some_and(|u| u > at(tick)) => s.end(w, true),
        Status::Sending => take_over(m, s, w, tick, cur, token),
        Status::Deferred => s.end(w, true),
        // Delivered (a duplicate), finished, or dead (its DLQ copy is not modelled).
        Status::Delivered | Status::Expired | Status::Cancelled | Status::Dead => s.end(w, false),
        Status::Scheduled | Status::Ready => s.invariant_error(w),
    }
}

/// `take_over` / `abandoned_change`: the ambiguous rule for a lease that lapsed mid-send.
fn take_over(m: &ProtocolModel, s: &mut State, w: usize, tick: u8, stale: Rec, token: LeaseToken) {
    let Some(stale_token) = stale.lease_token().cloned() else {
        return s.invariant_error(w);
    };
    let policy = stale.policy().cloned().unwrap_or_else(policy);
    let spent = Spent {
        attempts: stale.attempt_count(),
        throttles: stale.throttle_count(),
    };
    let now = at(tick);
    let next = decide_abandoned(
        &policy,
        spent,
        m.idempotent,
        true,
        fresh_until(),
        now,
        &mut rng(),
    );
    let change = match next {
        Next::Dead(reason) => abandoned_dies(stale_token, reason),
        Next::Retry { at, .. } if at > now => Change::Defer {
            token: stale_token,
            next_eligible_at: at,
            class: OutcomeClass::Ambiguous,
            error: Some(ABANDONED.into()),
        },
        Next::Expire => abandoned_dies(stale_token, DeadReason::Ambiguous),
        Next::Retry { .. } | Next::Delivered => Change::Takeover {
            stale_token,
            token: token.clone(),
            lease_expires_at: now.plus(TICK * u32::from(LEASE_TICKS)),
        },
    };
    s.workers[w] = Phase::Write(Pending::from(stale, change, tick, Then::TakeOver(token)));
}

/// `resolve_abandoned`: found `sending` when cancelling; once its lease lapsed, the ambiguous
/// rule with no resend.
fn resolve_abandoned(m: &ProtocolModel, s: &mut State, w: usize, tick: u8, sending: Rec) {
    let (Some(until), Some(stale_token)) =
        (sending.lease_expires_at(), sending.lease_token().cloned())
    else {
        return s.invariant_error(w);
    };
    let now = at(tick);
    if until > now {
        return s.end(w, true);
    }
    let spent = Spent::default();
    let next = decide_abandoned(&policy(), spent, m.idempotent, false, now, now, &mut rng());
    let reason = match next {
        Next::Dead(reason) => reason,
        _ => DeadReason::Ambiguous,
    };
    let change = abandoned_dies(stale_token, reason);
    s.workers[w] = Phase::Write(Pending::from(sending, change, tick, Then::Resolve));
}

fn abandoned_dies(stale_token: LeaseToken, reason: DeadReason) -> Change {
    Change::Die {
        token: Some(stale_token),
        reason,
        spends_attempt: true,
        error: Some(ABANDONED.into()),
    }
}

/// Too little lease left to cover a provider call: the consumer gives it back unsent.
pub fn must_release(m: &ProtocolModel, s: &State, lease: &Lease) -> bool {
    let left = lease
        .record
        .lease_expires_at()
        .map_or(std::time::Duration::ZERO, |until| until.since(at(s.now)));
    left < PROVIDER_TIMEOUT && m.fault != Some(Fault::SendWithoutLeaseCheck)
}

/// `release_unsent`.
pub fn release(s: &mut State, w: usize, lease: Lease) {
    let change = Change::Release { token: lease.token };
    s.workers[w] = Phase::Write(Pending::from(lease.record, change, s.now, Then::Release));
}

/// The send, then `settle`: the policy's decision, to be written under the lease.
pub fn send(m: &ProtocolModel, s: &mut State, w: usize, lease: Lease, sent: Sent) {
    let ledger = s.ledger.as_ref().map(|r| r.status());
    if matches!(ledger, Some(Status::Delivered | Status::Cancelled)) {
        s.ghost.sent_after_final = true;
    }
    if sent != Sent::Transient {
        s.acceptances += 1;
    }
    let (change, then) = settle(m, &lease, sent, s.now);
    s.workers[w] = Phase::Write(Pending::from(lease.record, change, s.now, then));
}

/// `settle`: what the policy decides for the provider's answer, as the write to make.
fn settle(m: &ProtocolModel, lease: &Lease, sent: Sent, tick: u8) -> (Change, Then) {
    let policy = lease.record.policy().cloned().unwrap_or_else(policy);
    let spent = Spent {
        attempts: lease.record.attempt_count(),
        throttles: lease.record.throttle_count(),
    };
    let outcome = sent.outcome();
    let error = match &outcome {
        Outcome::Transient { error } | Outcome::Ambiguous { error } => Some(error.clone()),
        _ => None,
    };
    let (now, idempotent, token) = (at(tick), m.idempotent, lease.token.clone());
    match decide(
        &policy,
        spent,
        &outcome,
        idempotent,
        fresh_until(),
        now,
        &mut rng(),
    ) {
        Next::Delivered => {
            let then = Then::Deliver(token.clone());
            let receipt = None;
            (Change::Deliver { token, receipt }, then)
        }
        Next::Retry { at, class, .. } => {
            let next_eligible_at = at;
            let change = Change::Defer {
                token,
                next_eligible_at,
                class,
                error,
            };
            (change, Then::Retry)
        }
        Next::Dead(reason) => {
            let spends_attempt = outcome.class() != OutcomeClass::Throttled;
            let token = Some(token);
            let change = Change::Die {
                token,
                reason,
                spends_attempt,
                error,
            };
            (change, Then::Dead)
        }
        Next::Expire => unreachable!("freshness is beyond the model's clock"),
    }
}
