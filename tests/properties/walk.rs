//! Walks for the state machine suites: arbitrary sequences of changes applied with
//! `ledger::apply` from no record, each step checked; and checks that the walks are
//! not vacuous (they reach every status, apply every change, outgrow the history bound).

use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{TestCaseError, TestRunner};
use reminders::ledger::{apply, Change, Ctx, DeliveryRecord, Refused, HISTORY_BOUND};

use crate::strategies::{change, key, T0};

/// One write: the clock moves on, then the change is applied with this TTL.
#[derive(Debug, Clone)]
pub struct Step {
    advance_ms: u64,
    expires_at: i64,
    change: Change,
}

pub fn steps() -> impl Strategy<Value = Vec<Step>> {
    steps_of(8..=40, change())
}

/// Walks that start with a claim, for the properties of a claimed delivery (its policy and
/// budget): with `steps()`, 128 of 330 walks never applied one.
pub fn claimed_steps() -> impl Strategy<Value = Vec<Step>> {
    let claim = change().prop_filter("a claim", |c| matches!(c, Change::Claim { .. }));
    (steps_of(1..=1, claim), steps()).prop_map(|(mut first, rest)| {
        first.extend(rest);
        first
    })
}

/// Walks that more often end the delivery (cancels and expiries drawn more often), for the
/// properties of terminal states: with `steps()`, 128 of 339 walks never reached one.
pub fn ending_steps() -> impl Strategy<Value = Vec<Step>> {
    let ending = prop_oneof![
        6 => change(),
        1 => Just(Change::Cancel),
        1 => Just(Change::Expire),
    ];
    steps_of(8..=40, ending)
}

/// Walks long enough to apply more than `HISTORY_BOUND` changes: without the changes that
/// end a delivery, they cycle through claims, deferrals, deaths and redrives.
pub fn long_steps() -> impl Strategy<Value = Vec<Step>> {
    let going_on = change().prop_filter("a change that can end the delivery", |c| {
        !matches!(
            c,
            Change::Deliver { .. }
                | Change::Expire
                | Change::Cancel
                | Change::ExpireHeld { .. }
                | Change::Reconcile { .. }
        )
    });
    steps_of(100..=240, going_on)
}

fn steps_of(
    len: std::ops::RangeInclusive<usize>,
    change: impl Strategy<Value = Change>,
) -> impl Strategy<Value = Vec<Step>> {
    let step = (0u64..=90_000, 1_700_000_000i64..=1_800_000_000, change).prop_map(
        |(advance_ms, expires_at, change)| Step {
            advance_ms,
            expires_at,
            change,
        },
    );
    prop::collection::vec(step, len)
}

/// What one step saw: the record before, the change, its context and the answer.
pub struct Seen<'a> {
    pub before: Option<&'a DeliveryRecord>,
    pub change: &'a Change,
    pub ctx: &'a Ctx,
    pub result: &'a Result<DeliveryRecord, Refused>,
}

/// Apply `steps` from no record, keeping each applied result, and check every step. `check`
/// answers whether the step was one it checks; a walk with no such step is rejected (as
/// `prop_assume!` would), so a property that checks nothing in most walks fails on its
/// rejects (`crate::config`) instead of passing vacuously.
pub fn walk(
    steps: &[Step],
    mut check: impl FnMut(Seen<'_>) -> Result<bool, TestCaseError>,
) -> Result<(), TestCaseError> {
    let mut current: Option<DeliveryRecord> = None;
    let mut now = T0;
    let mut checked = 0usize;
    for step in steps {
        now = now.plus(Duration::from_millis(step.advance_ms));
        let ctx = Ctx {
            key: key(),
            now,
            expires_at: step.expires_at,
            origin: None,
        };
        let result = apply(current.as_ref(), step.change.clone(), &ctx);
        checked += usize::from(check(Seen {
            before: current.as_ref(),
            change: &step.change,
            ctx: &ctx,
            result: &result,
        })?);
        if let Ok(next) = result {
            current = Some(next);
        }
    }
    if checked == 0 {
        return Err(TestCaseError::reject(
            "no step of the walk was one the property checks",
        ));
    }
    Ok(())
}

/// The walks are not vacuous: over the suite's cases they reach every status and apply
/// every kind of change.
#[test]
fn walks_reach_every_status_and_apply_every_change() {
    let mut runner = TestRunner::deterministic();
    let (mut statuses, mut applied) = (std::collections::BTreeSet::new(), Vec::new());
    for _ in 0..crate::config().cases {
        let walk_steps = steps().new_tree(&mut runner).expect("a walk").current();
        walk(&walk_steps, |seen| {
            if let Ok(next) = seen.result {
                statuses.insert(next.status());
                applied.push(seen.change.name());
            }
            Ok(true)
        })
        .expect("no checks");
    }
    assert_eq!(statuses.len(), 7, "reached only {statuses:?}");
    for name in [
        "claim",
        "takeover",
        "deliver",
        "defer",
        "die",
        "expire",
        "cancel",
        "redrive",
        "claim_dlq_copy",
        "copied_to_dlq",
        "expire_held",
        "release",
        "reconcile",
    ] {
        assert!(applied.contains(&name), "{name} never applied");
    }
}

/// The long walks outgrow the history bound, so `history_is_bounded` sees entries dropped.
#[test]
fn long_walks_outgrow_the_history_bound() {
    let mut runner = TestRunner::deterministic();
    let (walks, mut outgrown) = (64, 0);
    for _ in 0..walks {
        let walk_steps = long_steps()
            .new_tree(&mut runner)
            .expect("a walk")
            .current();
        let mut last = 0;
        walk(&walk_steps, |seen| {
            last = seen.result.as_ref().map_or(last, DeliveryRecord::seq);
            Ok(true)
        })
        .expect("no checks");
        outgrown += u32::from(last > HISTORY_BOUND);
    }
    assert!(
        outgrown >= walks / 4,
        "only {outgrown} of {walks} walks outgrew it"
    );
}
