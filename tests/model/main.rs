//! An exhaustive model check of the ledger protocol (docs/design.md, "Ledger") with stateright.
//!
//! One delivery key; a ledger holding at most one record, written by compare-and-set as
//! `MemoryLedger::put_if` does; workers running the consumer's protocol (claim → send →
//! outcome written under the lease), one ledger operation a step; an operator whose cancel
//! and redrive are ledger operations too, interleaved with the workers'. The code checked is
//! the library's: every write is a real `delivery::Transition` (conflicts, verification and
//! read-back included) driven against the model's ledger, every answer the real
//! `claim_answer` / `cancel_answer`, every record the real `ledger::apply`, every decision the
//! real `policy::decide`, `delivery::settled` and `delivery::abandoned`, the lease rule
//! `ConsumerConfig::lease_covers_send`. The checker explores every interleaving of those
//! steps with crashes, lost write responses, lease expiry, the reminder going stale and the
//! provider's answers (delivered, transient, ambiguous; or throttled, rejected), with an
//! idempotent provider and with one that is not, and checks `properties.rs` in every state.
//!
//! `cargo test --test model -- --ignored` runs larger checks (`MODEL_WORKERS`, default 3;
//! `MODEL_TICKS`, default 1).

mod fingerprint;
mod fixtures;
mod operator;
mod properties;
mod protocol;
mod record;
mod worker;

use std::collections::BTreeSet;
use std::time::Instant;

use stateright::{Checker, HasDiscoveries, Model};

use protocol::{Bounds, Fault, ProtocolModel};
use record::Sent;

/// The races: a lease lapsing mid-send and taken over (or the delivery killed as ambiguous),
/// a crash, a cancel racing a claim and a redrive, a death, a redrive and a resend. Small enough
/// for a debug build on two cores.
const BOUNDS: Bounds = Bounds {
    messages: 2,
    ticks: 1,
    crashes: 1,
    lost_responses: 0,
    cancels: 1,
    redrives: 1,
    fresh_through: None,
};

/// A lost write response instead of the cancel: the read-back, against every other step.
const LOSS: Bounds = Bounds {
    lost_responses: 1,
    cancels: 0,
    ..BOUNDS
};

/// The provider throttles or refuses for good, and the reminder goes stale after tick 1.
const REFUSALS: Bounds = Bounds {
    ticks: 2,
    lost_responses: 1,
    redrives: 0,
    fresh_through: Some(1),
    ..BOUNDS
};

fn model(workers: usize, idempotent: bool, bounds: Bounds, fault: Option<Fault>) -> ProtocolModel {
    ProtocolModel {
        workers,
        idempotent,
        bounds,
        answers: &Sent::FAILURES,
        fault,
    }
}

fn refusals(workers: usize, idempotent: bool, fault: Option<Fault>) -> ProtocolModel {
    ProtocolModel {
        answers: &Sent::REFUSALS,
        ..model(workers, idempotent, REFUSALS, fault)
    }
}

/// Check every property exhaustively; the number of unique states.
fn check(model: ProtocolModel) -> usize {
    let label = format!(
        "{} workers, {} provider, {:?}",
        model.workers,
        if model.idempotent {
            "idempotent"
        } else {
            "non-idempotent"
        },
        model.bounds,
    );
    let started = Instant::now();
    let checker = model.checker().spawn_bfs().join();
    let took = started.elapsed();
    let states = checker.unique_state_count();
    println!("model check, {label}: {states} unique states in {took:.1?}");
    checker.assert_properties();
    states
}

#[test]
fn idempotent_provider_two_workers() {
    let states = check(model(2, true, BOUNDS, None));
    // 1,066,080 when written (95 s in a debug build): far fewer means the model lost
    // behaviour.
    assert!(states > 700_000, "the model collapsed: {states} states");
}

#[test]
fn non_idempotent_provider_two_workers() {
    let states = check(model(2, false, BOUNDS, None));
    // 414,401 when written.
    assert!(states > 280_000, "the model collapsed: {states} states");
}

#[test]
fn lost_responses_idempotent_provider() {
    let states = check(model(2, true, LOSS, None));
    // 114,430 when written.
    assert!(states > 75_000, "the model collapsed: {states} states");
}

#[test]
fn lost_responses_non_idempotent_provider() {
    let states = check(model(2, false, LOSS, None));
    // 49,076 when written.
    assert!(states > 32_000, "the model collapsed: {states} states");
}

fn from_env(name: &str, default: u8) -> u8 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// More workers (and, if asked, more ticks of the clock) than the default run.
fn larger(idempotent: bool) -> ProtocolModel {
    let workers = usize::from(from_env("MODEL_WORKERS", 3));
    let ticks = from_env("MODEL_TICKS", BOUNDS.ticks);
    let messages = u8::try_from(workers).expect("a few workers");
    // Every bound at once: the cancel racing the redrive, a lost response and a crash.
    let bounds = Bounds {
        messages,
        ticks,
        lost_responses: 1,
        ..BOUNDS
    };
    model(workers, idempotent, bounds, None)
}

#[test]
#[ignore = "minutes: cargo test --release --test model -- --ignored"]
fn idempotent_provider_more_workers() {
    check(larger(true));
}

#[test]
#[ignore = "minutes: cargo test --release --test model -- --ignored"]
fn non_idempotent_provider_more_workers() {
    check(larger(false));
}

/// Three workers, within CI's time: three copies of the message racing on the lease, with a
/// crash and a lost response, but no cancel or redrive (the two-worker runs explore those;
/// with a cancel, three workers take minutes).
const THREE: Bounds = Bounds {
    messages: 3,
    lost_responses: 1,
    cancels: 0,
    redrives: 0,
    ..BOUNDS
};

/// Check the properties that must always hold (with no redrive, some of the reachability
/// ones cannot be met); the number of unique states.
fn check_always(model: ProtocolModel) -> usize {
    let always: Vec<&'static str> = model
        .properties()
        .into_iter()
        .filter(|p| p.expectation == stateright::Expectation::Always)
        .map(|p| p.name)
        .collect();
    let started = Instant::now();
    let checker = model.checker().spawn_bfs().join();
    let states = checker.unique_state_count();
    println!(
        "model check, 3 workers: {states} unique states in {:.1?}",
        started.elapsed()
    );
    for name in always {
        checker.assert_no_discovery(name);
    }
    states
}

#[test]
fn three_workers_idempotent_provider() {
    let states = check_always(model(3, true, THREE, None));
    assert!(states > 10_000, "the model collapsed: {states} states");
}

#[test]
fn three_workers_non_idempotent_provider() {
    let states = check_always(model(3, false, THREE, None));
    assert!(states > 10_000, "the model collapsed: {states} states");
}

#[test]
fn refusals_and_expiry_idempotent_provider() {
    let states = check(refusals(2, true, None));
    // 144,572 when written.
    assert!(states > 95_000, "the model collapsed: {states} states");
}

#[test]
fn refusals_and_expiry_non_idempotent_provider() {
    let states = check(refusals(2, false, None));
    // 98,803 when written.
    assert!(states > 65_000, "the model collapsed: {states} states");
}

/// The checker finds a counterexample to `property` in `model`.
fn caught(model: ProtocolModel, property: &'static str) {
    let fault = model.fault;
    let checker = model
        .checker()
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property])))
        .spawn_bfs()
        .join();
    let found: Vec<_> = checker.discoveries().into_keys().collect();
    let Some(path) = checker.discovery(property) else {
        panic!("{fault:?}: no counterexample to {property:?}; found {found:?}");
    };
    println!("{fault:?}: discoveries {found:?}");
    println!("{fault:?} breaks {property:?}:");
    for action in path.into_actions() {
        println!("  {action:?}");
    }
}

/// An outcome written with `Expected` from a fresh read, not from the item the lease was
/// taken on: a late worker's outcome lands over a newer lease.
#[test]
fn planted_unfenced_outcome_write_is_caught() {
    let m = model(2, true, BOUNDS, Some(Fault::UnfencedOutcome));
    caught(m, properties::ONE_LIVE_LEASE);
}

/// A send without checking that the lease still covers it: a lapsed lease's holder sends
/// after the worker that took it over delivered.
#[test]
fn planted_send_without_lease_check_is_caught() {
    let m = model(2, true, BOUNDS, Some(Fault::SendWithoutLeaseCheck));
    caught(m, properties::NO_SEND_AFTER_FINAL);
}

/// Intake and the send never look at freshness: a claim after fresh_until sends.
#[test]
fn planted_ignored_freshness_is_caught() {
    let m = refusals(2, true, Some(Fault::IgnoreFreshness));
    caught(m, properties::NEVER_STALE);
}

/// A cancel racing a redrive, unfixed: a cancel that leaves a dead delivery dead and answers
/// "already dead"; a redrive that read the reminder before the cancel's mark moves it to ready, and
/// a worker sends after the answer.
#[test]
fn planted_cancel_leaving_a_dead_delivery_is_caught() {
    let m = model(2, true, BOUNDS, Some(Fault::CancelLeavesDead));
    caught(m, properties::NO_SEND_AFTER_CANCEL);
}

/// A consumer that believes a provider honours idempotency keys when it does not: a lapsed
/// lease's send is resent, and the provider accepts it twice.
#[test]
fn planted_assumed_idempotency_is_caught() {
    let m = model(2, false, LOSS, Some(Fault::AssumeIdempotent));
    caught(m, properties::AT_MOST_ONCE);
}

/// A cancel that only flips the reminder's status: a worker past intake still sends after
/// the cancel answered "cancelled".
#[test]
fn planted_cancel_without_the_ledger_is_caught() {
    let m = model(2, true, BOUNDS, Some(Fault::CancelOnlyMarks));
    caught(m, properties::NO_SEND_AFTER_CANCEL);
}
