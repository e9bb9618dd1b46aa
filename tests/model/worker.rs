//! One worker running the consumer's protocol for one message, one ledger operation a step.
//! This file is `delivery::transition`'s loop around every write (a conflict re-applies an
//! intent to the item it returned; a write whose response was lost is read back); what the
//! consumer does with each answer is in `record.rs`. Every next record comes from the real
//! `apply`.

use reminders::clock::Timestamp;
use reminders::delivery::state::{apply, Change, DeliveryRecord, LeaseToken, Refused, Status, Why};
use reminders::ports::Expected;

use crate::fixtures::{at, ctx, policy, Rec, LEASE_TICKS};
use crate::protocol::{Fault, ProtocolModel, State};
use crate::record::{answered, Answer};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No message in hand.
    Idle,
    /// A transition in progress: its next step is one ledger operation.
    Write(Pending),
    /// The write applied but its response was lost: the next step reads the item back.
    ReadBack { pending: Pending, next: Rec },
    /// Holding a lease: the next step is the send, or giving the lease back unsent.
    Send(Lease),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub record: Rec,
    pub token: LeaseToken,
}

/// A call of `delivery::transition` in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The caller's last view (`None`: the assumption that there is no item yet).
    pub seen: Option<Rec>,
    pub verified: bool,
    pub change: Change,
    /// The tick of the write's context (`ctx.now`).
    pub tick: u8,
    pub then: Then,
}

impl Pending {
    /// A write from an item the worker has seen.
    pub fn from(seen: Rec, change: Change, tick: u8, then: Then) -> Self {
        Self {
            seen: Some(seen),
            verified: true,
            change,
            tick,
            then,
        }
    }
}

/// What the consumer does with the write's answer (which function of `consumer/record`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Then {
    /// `claim()`: acquired → send; a lapsed lease → the ambiguous rule (`take_over`).
    Claim(LeaseToken),
    /// `take_over()`: a takeover applied → send under the new lease.
    TakeOver(LeaseToken),
    /// `settle::delivered()`: refused because the delivery died meanwhile → reconcile.
    Deliver(LeaseToken),
    /// `settle::retry()`: a defer under our lease.
    Retry,
    /// `settle::died()`.
    Dead,
    /// `release_unsent()`.
    Release,
    /// `settle::delivered()`'s reconciliation.
    Reconcile,
    /// Intake's `finish(Cancel)`: refused from `sending` → `resolve_abandoned`.
    Cancel,
    /// `resolve_abandoned()`'s death.
    Resolve,
    /// `die_budget_spent()`: a claim refused for want of an attempt.
    BudgetSpent,
}

impl Phase {
    /// The lease this worker may still send or write an outcome under, until when.
    pub fn held_until(&self) -> Option<Timestamp> {
        let own = |then: &Then| {
            matches!(
                then,
                Then::Deliver(_) | Then::Retry | Then::Dead | Then::Release
            )
        };
        match self {
            Phase::Send(lease) => lease.record.lease_expires_at(),
            Phase::Write(p) if own(&p.then) => p.seen.as_ref().and_then(|r| r.lease_expires_at()),
            _ => None,
        }
    }
}

/// A message received: intake (is the reminder cancelled?), then the claim's write.
pub fn start(s: &mut State, w: usize) {
    let tick = s.now;
    s.queue -= 1;
    let (change, then) = if s.reminder_cancelled {
        (Change::Cancel, Then::Cancel)
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
    s.workers[w] = Phase::Write(Pending {
        seen: None,
        verified: false,
        change,
        tick,
        then,
    });
}

/// What the write would store, and whether the ledger's condition holds for it.
pub fn attempt(
    m: &ProtocolModel,
    s: &State,
    p: &Pending,
) -> Result<(DeliveryRecord, bool), Refused> {
    let next = apply(p.seen.as_deref(), p.change.clone(), &ctx(p.tick))?;
    let outcome = matches!(
        p.change,
        Change::Deliver { .. } | Change::Defer { .. } | Change::Die { token: Some(_), .. }
    );
    let expected = if outcome && m.fault == Some(Fault::UnfencedOutcome) {
        // Planted fault: the outcome decided under the lease, written against a fresh read.
        Expected::of(s.ledger.as_deref())
    } else {
        Expected::of(p.seen.as_deref())
    };
    Ok((next, Expected::of(s.ledger.as_deref()) == expected))
}

/// One round of `delivery::transition`: one ledger operation.
pub fn write(m: &ProtocolModel, s: &mut State, w: usize, mut p: Pending) {
    let (next, holds) = match attempt(m, s, &p) {
        Ok(attempted) => attempted,
        Err(_) if !p.verified => {
            // `None` was an assumption: read the item once before answering.
            p.verified = true;
            p.seen.clone_from(&s.ledger);
            s.workers[w] = Phase::Write(p);
            return;
        }
        Err(refused) => {
            let (current, why) = (p.seen.clone(), refused.why);
            return answered(m, s, w, p, Answer::Refused { current, why });
        }
    };
    if holds {
        let next = Rec::new(next);
        s.put(next.clone(), &p.change);
        return answered(m, s, w, p, Answer::Applied(next));
    }
    let current = s.ledger.clone();
    p.verified = true;
    if let Some(cur) = current.as_ref().filter(|c| is_ours(c, &next, &p.change)) {
        let cur = cur.clone();
        return answered(m, s, w, p, Answer::Applied(cur));
    }
    if is_intent(&p.change) {
        p.seen = current;
        s.workers[w] = Phase::Write(p);
    } else {
        let why = Why::Stale;
        answered(m, s, w, p, Answer::Refused { current, why });
    }
}

/// The write applies, but its response is lost: the worker sees an error.
pub fn lose_response(m: &ProtocolModel, s: &mut State, w: usize, p: Pending) {
    let (next, holds) = attempt(m, s, &p).expect("a lost response needs a write that applies");
    assert!(holds, "a lost response needs a write that applies");
    let next = Rec::new(next);
    s.put(next.clone(), &p.change);
    s.workers[w] = Phase::ReadBack { pending: p, next };
}

/// `read_back`: the write was ours if the item is what we wrote (or carries our fresh
/// lease); otherwise the error stands, and the message is received again later.
pub fn read_back(m: &ProtocolModel, s: &mut State, w: usize, p: Pending, next: Rec) {
    match s.ledger.clone() {
        Some(cur) if is_ours(&cur, &next, &p.change) => answered(m, s, w, p, Answer::Applied(cur)),
        _ => s.end(w, true),
    }
}

/// `delivery::is_ours`.
pub fn is_ours(current: &DeliveryRecord, attempted: &DeliveryRecord, change: &Change) -> bool {
    if current == attempted {
        return true;
    }
    match change {
        Change::Claim { token, .. } | Change::Takeover { token, .. } => {
            current.status() == Status::Sending && current.lease_token() == Some(token)
        }
        _ => false,
    }
}

/// `delivery::on_conflict`: these changes are re-applied to the item a conflict returned.
fn is_intent(change: &Change) -> bool {
    matches!(
        change,
        Change::Claim { .. }
            | Change::Cancel
            | Change::Expire
            | Change::Redrive { .. }
            | Change::Die { token: None, .. }
            | Change::Reconcile { .. }
    )
}
