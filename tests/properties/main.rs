//! Property tests (proptest) over the crate's public API: the retry decision
//! ([`reminders::policy::decide`]), the delivery state machine
//! ([`reminders::ledger::apply`]) on its own and driven by `decide` the way the
//! consumer drives it, the parsers at the edge (queue messages, redrive requests,
//! `Retry-After`, recipients), and recurrence rules against a brute-force oracle
//! ([`reminders::domain::series::Rule`]).
//!
//! Not covered: the DynamoDB reminder item decoder (`aws::dynamo::item`). Its module is private
//! (`mod item;`, functions `pub(super)`), and the only public way in is
//! `DynamoReminderStore` over a live DynamoDB client.
//!
//! Run with `cargo test --test properties`. `PROPTEST_CASES` does not change the case counts:
//! each suite sets its own (see [`config`] and [`cheap`]).

mod message;
mod policy;
mod protocol;
mod recipient;
mod redrive_request;
mod retry_after;
mod rrule;
mod state;
mod strategies;
mod walk;

use proptest::test_runner::{Config, FileFailurePersistence};

/// Cases for the decision and state machine properties.
pub fn config() -> Config {
    with_cases(256)
}

/// Cases for the parsers, which are cheap to run.
pub fn cheap() -> Config {
    with_cases(2048)
}

/// Failures are kept beside each module (`state.rs` → `state.regressions`), not in the shared
/// `tests/proptest-regressions/`, where suites with a module of the same name would mix.
/// A test that rejects (`prop_assume!`) more than half as many inputs as it runs fails: its
/// generator mostly makes inputs the property says nothing about.
fn with_cases(cases: u32) -> Config {
    Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        max_global_rejects: cases / 2,
        ..Config::with_cases(cases)
    }
}
