//! Unit tests of the consumer's own small decisions: which actions are batch item failures,
//! and how failures are counted (a bug is not an outage).

use serde_json::Value;

use super::*;
use crate::ports::PortError;

#[test]
fn only_finished_records_leave_the_queue() {
    assert!(!Action::Ack.is_failure());
    assert!(
        !Action::Reenqueued.is_failure(),
        "the copy carries the wait"
    );
    assert!(Action::Hold { secs: 5 }.is_failure());
    assert!(Action::Retry.is_failure());
    assert!(Action::Released.is_failure());
}

#[test]
fn invariant_violations_are_not_outages() {
    let bug = PortError::Invariant {
        op: "ledger.claim",
        message: "claim refused without an item".into(),
    };
    assert!(bug.is_invariant() && !bug.is_retryable());
    let outage = PortError::Unavailable {
        op: "ledger.put",
        message: "503".into(),
    };
    assert!(!outage.is_invariant() && outage.is_retryable());
    let m = Metrics {
        infra_errors: 2,
        invariant_errors: 1,
        panics: 4,
        ..Metrics::default()
    };
    let line: Value = serde_json::from_str(&m.emf(
        Channel::Email,
        Timestamp::from_millis(1),
        super::metrics::NAMESPACE,
    ))
    .unwrap();
    assert_eq!(
        line["infra_errors"], 2,
        "panics and invariants stay off the outage alarm"
    );
    assert_eq!(line["invariant_errors"], 5, "a panic is a bug too");
}
