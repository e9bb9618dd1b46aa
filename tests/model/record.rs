//! What the consumer's steps (`consumer/steps/*.rs`) do with each answer: send
//! under a lease it acquired, take over a lapsed one by the ambiguous rule, write the
//! provider's outcome under its lease, reconcile, resolve an abandoned send when cancelling
//! or expiring — and whether the record ends by acking its message or holding it (it comes
//! back later). The answers and writes are the library's own: `delivery::claim_answer`,
//! `delivery::abandoned`, `policy::decide` and `delivery::settled`; the lease rule is
//! `ConsumerConfig::lease_covers_send`.

use std::time::Duration;

use reminders::delivery::abandoned::{self, Lapsed, Resolve};
use reminders::delivery::{claim_answer, settled, Claim, Written};
use reminders::domain::reminder::is_stale;
use reminders::domain::DeadReason;
use reminders::ledger::{Change, LeaseToken, Status};
use reminders::policy::{decide, Outcome, Spent};

use crate::fixtures::{at, consumer, policy, rng};
use crate::protocol::{Fault, ProtocolModel, State};
use crate::worker::{applied, begin, Lease, Phase, Then};

/// The provider's answer to a send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sent {
    Delivered,
    /// Failed before the request was acted on: not accepted.
    Transient,
    /// Accepted, then the answer was lost: counts as an acceptance.
    Ambiguous,
    /// 429: not accepted, no attempt spent.
    Throttled,
    /// Refused for good: not accepted.
    Permanent,
}

impl Sent {
    pub const FAILURES: [Sent; 3] = [Sent::Delivered, Sent::Transient, Sent::Ambiguous];
    pub const REFUSALS: [Sent; 3] = [Sent::Delivered, Sent::Throttled, Sent::Permanent];

    fn outcome(self) -> Outcome {
        match self {
            Sent::Delivered => Outcome::Delivered { receipt: None },
            Sent::Transient => Outcome::Transient {
                error: "transient".into(),
            },
            Sent::Ambiguous => Outcome::Ambiguous {
                error: "ambiguous".into(),
            },
            Sent::Throttled => Outcome::Throttled { retry_after: None },
            Sent::Permanent => Outcome::Permanent {
                error: "rejected".into(),
            },
        }
    }

    pub fn accepted(self) -> bool {
        matches!(self, Sent::Delivered | Sent::Ambiguous)
    }
}

/// What the consumer does with a write's answer.
pub fn answered(m: &ProtocolModel, s: &mut State, w: usize, then: Then, written: Written) {
    let ok = matches!(written, Written::Applied(_));
    match then {
        Then::Claim(token) => claimed(m, s, w, token, written),
        Then::TakeOver(token) => match (applied(&written), &written) {
            (Some(record), _) if record.status() == Status::Sending => {
                s.workers[w] = Phase::Send(Lease { record, token });
            }
            // Deferred for the backoff: hold; dead: acked.
            (Some(record), _) => s.end(w, record.status() == Status::Deferred),
            // Another worker got there first: look again shortly.
            (None, _) => s.end(w, true),
        },
        Then::Deliver(token) => match written {
            Written::Refused {
                current: Some(dead),
                ..
            } if dead.status() == Status::Dead => {
                let dead = std::sync::Arc::new(dead);
                let change = Change::Reconcile {
                    token,
                    receipt: None,
                };
                begin(m, s, w, Some(&dead), change, Then::Reconcile);
            }
            // Taken over meanwhile: the new holder's handle decides (`Action::Leave`).
            Written::Refused { .. } => s.end(w, true),
            Written::Applied(_) => s.end(w, false),
        },
        Then::Finish => match written {
            Written::Refused {
                current: Some(r), ..
            } if r.status() == Status::Sending => resolve_abandoned(m, s, w, r),
            // Finished here or before, or dead (its DLQ copy is not modelled): acked.
            _ => s.end(w, false),
        },
        // Held for the retry or the release; `Action::Leave` when the lease was taken over.
        Then::Retry | Then::Release => s.end(w, true),
        Then::Dead | Then::Reconcile | Then::ExpireHeld => s.end(w, !ok),
        Then::Resolve | Then::BudgetSpent => s.end(w, !ok),
    }
}

/// `claim()`'s answer, and `not_ours`.
fn claimed(m: &ProtocolModel, s: &mut State, w: usize, token: LeaseToken, written: Written) {
    let now = at(s.now);
    match claim_answer(written, now) {
        Ok(Claim::Acquired(record)) => {
            let record = std::sync::Arc::new(record);
            s.workers[w] = Phase::Send(Lease { record, token });
        }
        Ok(Claim::LeaseExpired(stale)) => take_over(m, s, w, stale, token),
        Ok(Claim::BudgetSpent(cur)) => {
            // `die_budget_spent`: no attempt left, dead as `attempts_exhausted`.
            let change = Change::Die {
                token: None,
                reason: DeadReason::AttemptsExhausted,
                spends_attempt: false,
                error: Some("no attempt left in the budget".into()),
                fallback_to: None,
                maybe_sent: false,
            };
            s.ghost.budget_spent_claim = true;
            begin(
                m,
                s,
                w,
                Some(&std::sync::Arc::new(cur)),
                change,
                Then::BudgetSpent,
            );
        }
        // A newer writer's status (never in the model) is held like these.
        Ok(Claim::HeldByOther { .. } | Claim::NotYetEligible { .. } | Claim::NewerStatus(_)) => {
            s.end(w, true)
        }
        // A duplicate, finished, or dead (its DLQ copy is not modelled).
        Ok(Claim::AlreadyDelivered(_) | Claim::Finished(_) | Claim::Dead(_)) => s.end(w, false),
        Err(_) => s.invariant_error(w),
    }
}

/// `take_over`: the ambiguous rule for a lease that lapsed mid-send.
fn take_over(
    m: &ProtocolModel,
    s: &mut State,
    w: usize,
    stale: reminders::ledger::DeliveryRecord,
    token: LeaseToken,
) {
    let cfg = consumer();
    let lapsed = Lapsed {
        policy: &cfg.policy,
        idempotent: m.consumer_trusts_idempotency(),
        fresh_until: m.fresh_until(),
        now: at(s.now),
        lease: cfg.lease,
    };
    match abandoned::after_lapse(&stale, &token, &lapsed, &mut rng()) {
        Ok(change) => {
            let stale = std::sync::Arc::new(stale);
            begin(m, s, w, Some(&stale), change, Then::TakeOver(token));
        }
        Err(_) => s.invariant_error(w),
    }
}

/// `resolve_abandoned`: found `sending` when cancelling or expiring; once its lease lapsed,
/// the ambiguous rule with no resend.
fn resolve_abandoned(
    m: &ProtocolModel,
    s: &mut State,
    w: usize,
    sending: reminders::ledger::DeliveryRecord,
) {
    let cfg = consumer();
    match abandoned::resolve(
        &sending,
        &cfg.policy,
        m.consumer_trusts_idempotency(),
        at(s.now),
        &mut rng(),
    ) {
        Ok(Resolve::Wait { .. }) => s.end(w, true),
        Ok(Resolve::Write(change)) => {
            let sending = std::sync::Arc::new(sending);
            begin(m, s, w, Some(&sending), change, Then::Resolve);
        }
        Err(_) => s.invariant_error(w),
    }
}

/// Stale before the send, or too little lease left to cover one: the consumer writes the
/// expiry or gives the lease back unsent instead of sending.
pub fn before_send(m: &ProtocolModel, s: &State, lease: &Lease) -> Option<(Change, Then)> {
    let now = at(s.now);
    let token = lease.token.clone();
    if is_stale(m.fresh_until(), now) && m.fault != Some(Fault::IgnoreFreshness) {
        return Some((Change::ExpireHeld { token }, Then::ExpireHeld));
    }
    let left = lease
        .record
        .lease_expires_at()
        .map_or(Duration::ZERO, |until| until.since(now));
    let covered = consumer().lease_covers_send(left);
    (!covered && m.fault != Some(Fault::SendWithoutLeaseCheck)).then_some((
        Change::Release {
            token,
            why: "lease too short",
        },
        Then::Release,
    ))
}

/// The step of a worker holding a lease that does not send.
pub fn instead_of_send(m: &ProtocolModel, s: &mut State, w: usize, lease: Lease) {
    let (change, then) = before_send(m, s, &lease).expect("a reason not to send");
    begin(m, s, w, Some(&lease.record), change, then);
}

/// The send, then `settle`: the policy's decision, written under the lease.
pub fn send(m: &ProtocolModel, s: &mut State, w: usize, lease: Lease, sent: Sent) {
    let ledger = s.ledger.as_ref().map(|r| r.status());
    if matches!(ledger, Some(Status::Delivered | Status::Cancelled)) {
        s.ghost.sent_after_final = true;
    }
    if s.ghost.cancel_answered {
        s.ghost.sent_after_cancel_answered = true;
    }
    if is_stale(m.fresh_until(), at(s.now)) {
        s.ghost.sent_stale = true;
    }
    if sent.accepted() {
        s.acceptances += 1;
    }
    s.ghost.throttled |= sent == Sent::Throttled;
    let policy = lease.record.policy().cloned().unwrap_or_else(policy);
    let spent = Spent {
        attempts: lease.record.attempt_count(),
        throttles: lease.record.throttle_count(),
    };
    let outcome = sent.outcome();
    let (now, fresh_until) = (at(s.now), m.fresh_until());
    let next = decide(
        &policy,
        spent,
        &outcome,
        m.consumer_trusts_idempotency(),
        fresh_until,
        now,
        &mut rng(),
    );
    let change = settled(&next, &outcome, lease.token.clone(), fresh_until);
    let then = match &change {
        Change::Deliver { .. } => Then::Deliver(lease.token.clone()),
        Change::Die { .. } => Then::Dead,
        _ => Then::Retry,
    };
    begin(m, s, w, Some(&lease.record), change, then);
}
