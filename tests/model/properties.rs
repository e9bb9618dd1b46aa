//! What must hold in every reachable state (`always`), and what must be reachable at all
//! (`sometimes`), so that a model that collapses cannot pass by exploring nothing.

use reminders::ledger::Status;
use stateright::Property;

use reminders::delivery::is_ours;

use crate::fixtures::{at, MAX_ATTEMPTS};
use crate::operator::{Canceller, Redriver};
use crate::protocol::{ProtocolModel, State};
use crate::record::Sent;
use crate::worker::{Phase, Then};

pub const AT_MOST_ONCE: &str =
    "non-idempotent provider: at most one acceptance unless redriven from ambiguous";
pub const NO_SEND_AFTER_FINAL: &str = "no send starts after the ledger says delivered or cancelled";
pub const TERMINAL_IS_FINAL: &str = "a terminal status never changes";
pub const WITHIN_BUDGET: &str = "attempt_count never exceeds max_attempts";
pub const ONE_LIVE_LEASE: &str = "at most one worker holds an unexpired lease";
pub const NO_INVARIANT_ERROR: &str = "the consumer never meets an impossible answer";
pub const BUDGET_AGREES: &str = "no claim finds the attempt budget spent (decide and apply agree)";
pub const NO_SEND_AFTER_CANCEL: &str =
    "no send starts after the operator's cancel answered, unless it answered in flight or delivered";
pub const NEVER_STALE: &str = "no send starts after fresh_until";

type Condition = fn(&ProtocolModel, &State) -> bool;

pub fn all(m: &ProtocolModel) -> Vec<Property<ProtocolModel>> {
    let always: [(&'static str, Condition); 9] = [
        (AT_MOST_ONCE, at_most_once),
        (NO_SEND_AFTER_FINAL, |_, s| !s.ghost.sent_after_final),
        (TERMINAL_IS_FINAL, |_, s| !s.ghost.terminal_changed),
        (WITHIN_BUDGET, within_budget),
        (ONE_LIVE_LEASE, one_live_lease),
        (NO_INVARIANT_ERROR, |_, s| !s.ghost.invariant_error),
        (BUDGET_AGREES, |_, s| !s.ghost.budget_spent_claim),
        (NO_SEND_AFTER_CANCEL, |_, s| {
            !s.ghost.sent_after_cancel_answered
        }),
        (NEVER_STALE, |_, s| !s.ghost.sent_stale),
    ];
    let b = &m.bounds;
    let mut props: Vec<_> = always
        .into_iter()
        .map(|(name, condition)| Property::always(name, condition))
        .chain(
            sometimes()
                .into_iter()
                .filter(|(name, _)| within_bounds(name, b))
                .map(|(name, condition)| Property::sometimes(name, condition)),
        )
        .collect();
    let (name, condition): (&'static str, Condition) = if m.idempotent {
        ("a lapsed lease taken over and delivered", |_, s| {
            s.ghost.took_over && status(s) == Some(Status::Delivered)
        })
    } else {
        (
            "accepted twice after an operator's ambiguous redrive",
            |_, s| s.acceptances >= 2,
        )
    };
    if within_bounds(name, b) {
        props.push(Property::sometimes(name, condition));
    }
    if m.answers.contains(&Sent::Throttled) {
        props.push(Property::sometimes(
            "throttled, then delivered",
            |_, s: &State| s.ghost.throttled && status(s) == Some(Status::Delivered),
        ));
        props.push(Property::sometimes("dead as rejected", |_, s: &State| {
            s.ledger
                .as_ref()
                .and_then(|r| r.dead_reason())
                .is_some_and(|r| r == reminders::domain::DeadReason::Rejected)
        }));
    }
    if m.bounds.fresh_through.is_some() {
        props.push(Property::sometimes("expired", |_, s: &State| {
            status(s) == Some(Status::Expired)
        }));
        props.push(Property::sometimes(
            "a lease held past fresh_until, expired unsent",
            |_, s: &State| writing(s, |then| *then == Then::ExpireHeld),
        ));
    }
    props
}

/// A run whose bounds allow no cancel, redrive or lost response cannot reach what needs one
/// (named so): those "sometimes" properties are left out of it, and checked by a run that
/// allows them.
fn within_bounds(name: &str, b: &crate::protocol::Bounds) -> bool {
    let needs = |what: &str, allowed: u8| !name.contains(what) || allowed > 0;
    needs("cancel", b.cancels) && needs("redriv", b.redrives) && needs("lost", b.lost_responses)
}

/// Reachable with either provider.
fn sometimes() -> [(&'static str, Condition); 10] {
    [
        ("delivered", |_, s| status(s) == Some(Status::Delivered)),
        ("cancelled", |_, s| status(s) == Some(Status::Cancelled)),
        ("redriven, then delivered", |_, s| {
            s.used.redrives > 0 && status(s) == Some(Status::Delivered)
        }),
        ("dead, then reconciled as delivered", |_, s| {
            s.ghost.reconciled
        }),
        ("a lost write response, read back as ours", |_, s| {
            s.workers.iter().any(|w| match w {
                Phase::Write(t, _) if t.reading_back() => {
                    let attempted = t.attempted().expect("a write to read back");
                    s.ledger
                        .as_ref()
                        .is_some_and(|cur| is_ours(cur, attempted, t.change()))
                }
                _ => false,
            })
        }),
        ("a lease too short, given back unsent", |_, s| {
            writing(s, |then| *then == Then::Release)
        }),
        (
            "a cancel meets an abandoned send and resolves it",
            |_, s| writing(s, |then| *then == Then::Resolve),
        ),
        (
            "a cancel answered while a worker is mid-transition",
            |_, s| {
                s.ghost.cancel_answered && s.workers.iter().any(|w| matches!(w, Phase::Write(..)))
            },
        ),
        ("a cancel and a redrive in flight at once", |_, s| {
            s.canceller != Canceller::Idle && s.redriver != Redriver::Idle
        }),
        ("two workers at once on the delivery", |_, s| {
            s.workers.iter().filter(|w| **w != Phase::Idle).count() > 1
        }),
    ]
}

fn status(s: &State) -> Option<Status> {
    s.ledger.as_ref().map(|r| r.status())
}

/// Some worker is about to make a write the consumer makes in `then`'s place.
fn writing(s: &State, then: impl Fn(&Then) -> bool) -> bool {
    s.workers
        .iter()
        .any(|w| matches!(w, Phase::Write(_, t) if then(t)))
}

fn at_most_once(m: &ProtocolModel, s: &State) -> bool {
    m.idempotent || s.acceptances <= 1 || s.ghost.redrove_ambiguous
}

fn within_budget(_: &ProtocolModel, s: &State) -> bool {
    s.ledger.as_ref().is_none_or(|r| {
        let max = r.policy().map_or(MAX_ATTEMPTS, |p| p.max_attempts);
        r.attempt_count() <= max
    })
}

fn one_live_lease(_: &ProtocolModel, s: &State) -> bool {
    let now = at(s.now);
    let live = s.workers.iter().filter_map(Phase::held_until);
    live.filter(|until| *until > now).count() <= 1
}
