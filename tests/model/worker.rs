//! One worker running the consumer's protocol for one message, one ledger operation a step.
//! Every write is the real `delivery::Transition` (its conflict, verification and read-back
//! rules included), driven here against the model's ledger; what the consumer does with each
//! answer is in `record.rs`.

use std::sync::Arc;

use reminders::clock::Timestamp;
use reminders::delivery::{Op, Progress, Transition, Written};
use reminders::domain::reminder::is_stale;
use reminders::ledger::{Change, LeaseToken};
use reminders::ports::{Cas, Expected, PortError};

use crate::fixtures::{at, ctx, policy, Rec, LEASE_TICKS};
use crate::protocol::{Fault, ProtocolModel, State};
use crate::record::answered;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No message in hand.
    Idle,
    /// A transition in progress (its next step is one ledger operation), and what the
    /// consumer does with its answer.
    Write(Box<Transition>, Then),
    /// Holding a lease: the next step is the send, or giving the lease back unsent.
    Send(Lease),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub record: Rec,
    pub token: LeaseToken,
}

/// What the consumer does with the write's answer (which function of `consumer/steps`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Then {
    /// `claim()`: acquired → send; a lapsed lease → the ambiguous rule (`take_over`).
    Claim(LeaseToken),
    /// `take_over()`: a takeover applied → send under the new lease.
    TakeOver(LeaseToken),
    /// `settle::delivered()`: refused because the delivery died meanwhile → reconcile.
    Deliver(LeaseToken),
    /// `settle::retry()` and `settle::expired()`: a defer under our lease.
    Retry,
    /// `settle::died()`.
    Dead,
    /// `release_unsent()`.
    Release,
    /// `expire_held()`: stale under our lease, before the send.
    ExpireHeld,
    /// `settle::delivered()`'s reconciliation.
    Reconcile,
    /// Intake's `finish(Cancel)` or `finish(Expire)`: refused from `sending` →
    /// `resolve_abandoned`.
    Finish,
    /// `resolve_abandoned()`'s death.
    Resolve,
    /// `die_budget_spent()`: a claim refused for want of an attempt.
    BudgetSpent,
}

impl Then {
    /// A write fenced by the lease this worker holds.
    fn under_own_lease(&self) -> bool {
        matches!(
            self,
            Then::Deliver(_) | Then::Retry | Then::Dead | Then::Release | Then::ExpireHeld
        )
    }
}

impl Phase {
    /// The lease this worker may still send or write an outcome under, until when. (A worker
    /// reading back its own outcome write has made it: it writes nothing more.)
    pub fn held_until(&self) -> Option<Timestamp> {
        match self {
            Phase::Send(lease) => lease.record.lease_expires_at(),
            Phase::Write(t, then) if then.under_own_lease() && !t.reading_back() => {
                t.seen().and_then(|r| r.lease_expires_at())
            }
            _ => None,
        }
    }
}

/// A message received: intake (is the reminder cancelled? stale?), then the claim's write.
pub fn start(m: &ProtocolModel, s: &mut State, w: usize) {
    let tick = s.now;
    s.queue -= 1;
    let (change, then) = if s.reminder_cancelled {
        (Change::Cancel, Then::Finish)
    } else if is_stale(m.fresh_until(), at(tick)) && m.fault != Some(Fault::IgnoreFreshness) {
        (Change::Expire, Then::Finish)
    } else {
        let token = s.fresh_token(w);
        let change = Change::Claim {
            token: token.clone(),
            lease_expires_at: at(tick + LEASE_TICKS),
            payload_version: 1,
            policy: policy(),
        };
        (change, Then::Claim(token))
    };
    begin(m, s, w, None, change, then);
}

/// Start a transition from `seen` at the current tick.
pub fn begin(
    m: &ProtocolModel,
    s: &mut State,
    w: usize,
    seen: Option<&Rec>,
    change: Change,
    then: Then,
) {
    let progress = Transition::start(seen.map(|r| (**r).clone()), change, ctx(s.now));
    go_on(m, s, w, progress, then);
}

fn go_on(m: &ProtocolModel, s: &mut State, w: usize, progress: Progress, then: Then) {
    match progress {
        Progress::Next(t) => s.workers[w] = Phase::Write(Box::new(t), then),
        Progress::Done(Ok(written)) => answered(m, s, w, then, written),
        // The record fails: its message comes back.
        Progress::Done(Err(_)) => s.end(w, true),
    }
}

/// The expectation the write is made with (a planted fault may swap it).
fn expected(m: &ProtocolModel, s: &State, t: &Transition, expected: Expected) -> Expected {
    let outcome = matches!(
        t.change(),
        Change::Deliver { .. } | Change::Defer { .. } | Change::Die { token: Some(_), .. }
    );
    if outcome && m.fault == Some(Fault::UnfencedOutcome) {
        // Planted fault: the outcome decided under the lease, written against a fresh read.
        Expected::of(s.ledger.as_deref())
    } else {
        expected
    }
}

/// The transition's write would land now.
pub fn would_apply(m: &ProtocolModel, s: &State, t: &Transition) -> bool {
    match t.op() {
        Op::PutIf { expected: e, .. } => expected(m, s, t, e).holds_for(s.ledger.as_deref()),
        Op::Get => false,
    }
}

/// The ledger's answer to the transition's operation, and the transition's next move.
pub fn ledger_step(m: &ProtocolModel, s: &mut State, t: Transition) -> Progress {
    let answer = match t.op() {
        Op::Get => None,
        Op::PutIf { next, expected: e } => Some((Arc::new(next.clone()), expected(m, s, &t, e))),
    };
    match answer {
        None => {
            let item = s.ledger.as_deref().cloned();
            t.got(Ok(item))
        }
        Some((next, e)) if e.holds_for(s.ledger.as_deref()) => {
            s.put(next, t.change());
            t.put(Ok(Cas::Applied))
        }
        Some(_) => {
            let current = s.ledger.as_deref().cloned().map(Box::new);
            t.put(Ok(Cas::Conflict(current)))
        }
    }
}

/// One step of the worker's transition.
pub fn write(m: &ProtocolModel, s: &mut State, w: usize, t: Transition, then: Then) {
    let progress = ledger_step(m, s, t);
    go_on(m, s, w, progress, then);
}

/// The write applies, but its response is lost: the worker sees an error and reads back.
pub fn lose_response(m: &ProtocolModel, s: &mut State, w: usize, t: Transition, then: Then) {
    let Op::PutIf { next, .. } = t.op() else {
        panic!("a lost response needs a write");
    };
    assert!(
        would_apply(m, s, &t),
        "a lost response needs a write that applies"
    );
    s.put(Arc::new(next.clone()), t.change());
    s.used.lost_responses += 1;
    let lost = PortError::Unavailable {
        op: "ledger.put_if",
        message: "response lost".into(),
    };
    let progress = t.put(Err(lost));
    go_on(m, s, w, progress, then);
}

/// A write's answer as the model keeps records.
pub fn applied(written: &Written) -> Option<Rec> {
    match written {
        Written::Applied(r) => Some(Arc::new(r.clone())),
        Written::Refused { .. } => None,
    }
}
