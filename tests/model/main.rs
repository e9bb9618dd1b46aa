//! An exhaustive model check of the ledger protocol (DESIGN §4) with stateright.
//!
//! One delivery key; a ledger holding at most one record, written by compare-and-set as
//! `MemoryLedger::put_if` does; workers running the consumer's protocol (claim → send →
//! outcome written under the lease, with `delivery::transition`'s conflict and read-back
//! handling), one ledger operation a step; an operator who cancels and redrives. Every next
//! record comes from the real `reminders::delivery::state::apply` applied to the real
//! `Change`s the consumer, redrive and cancel write, every retry decision from the real
//! `policy::decide` / `decide_abandoned`. The checker explores every interleaving of those
//! steps with crashes, lost write responses, lease expiry and the provider's answers, with an
//! idempotent provider and with one that is not, and checks `properties.rs` in every state.
//!
//! `cargo test --test model -- --ignored` runs larger checks (`MODEL_WORKERS`, default 3;
//! `MODEL_TICKS`, default 1): three workers take minutes (4,175,725 states in 8 minutes
//! for the non-idempotent provider in a debug build).

mod fingerprint;
mod fixtures;
mod properties;
mod protocol;
mod record;
mod worker;

use std::collections::BTreeSet;
use std::time::Instant;

use stateright::{Checker, HasDiscoveries, Model};

use protocol::{Bounds, Fault, ProtocolModel};

/// Small enough for a debug build on two cores; large enough for a lease to lapse mid-send
/// and be taken over (or the delivery killed as ambiguous), a crash, a lost response, a cancel
/// racing a claim, a death, a redrive and a resend.
const BOUNDS: Bounds = Bounds {
    messages: 2,
    ticks: 1,
    crashes: 1,
    lost_responses: 1,
    cancels: 1,
    redrives: 1,
};

fn model(workers: usize, idempotent: bool, bounds: Bounds, fault: Option<Fault>) -> ProtocolModel {
    ProtocolModel {
        workers,
        idempotent,
        bounds,
        fault,
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
    // 435,263 when written: far fewer means the model lost behaviour.
    assert!(states > 300_000, "the model collapsed: {states} states");
}

#[test]
fn non_idempotent_provider_two_workers() {
    let states = check(model(2, false, BOUNDS, None));
    // 183,288 when written.
    assert!(states > 120_000, "the model collapsed: {states} states");
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
    let bounds = Bounds {
        messages,
        ticks,
        ..BOUNDS
    };
    model(workers, idempotent, bounds, None)
}

#[test]
#[ignore = "minutes: cargo test --test model -- --ignored"]
fn idempotent_provider_more_workers() {
    check(larger(true));
}

#[test]
#[ignore = "minutes: cargo test --test model -- --ignored"]
fn non_idempotent_provider_more_workers() {
    check(larger(false));
}

/// The checker finds a counterexample to `property` in a model with `fault` planted.
fn caught(fault: Fault, idempotent: bool, property: &'static str) {
    let checker = model(2, idempotent, BOUNDS, Some(fault))
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
    caught(Fault::UnfencedOutcome, true, properties::ONE_LIVE_LEASE);
}

/// A send without checking that the lease still covers it: a lapsed lease's holder sends
/// after the worker that took it over delivered.
#[test]
fn planted_send_without_lease_check_is_caught() {
    let property = properties::NO_SEND_AFTER_FINAL;
    caught(Fault::SendWithoutLeaseCheck, true, property);
}
