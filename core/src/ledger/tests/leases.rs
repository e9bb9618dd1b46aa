//! Leases and who may act under them: fenced outcomes, eligibility, takeovers, redrive by the
//! ledger's own reason, and reconciliation by the lapsed lease holder.

use std::time::Duration;

use super::*;

#[test]
fn outcome_writes_are_fenced_by_the_lease_token() {
    let sending = in_state(Status::Sending).unwrap();
    let stale = apply(
        Some(&sending),
        Change::Deliver {
            token: tok(9),
            receipt: None,
        },
        &ctx_at(T0),
    );
    assert_eq!(stale.unwrap_err().why, Why::WrongLease);
}

#[test]
fn deferred_is_claimable_only_once_eligible() {
    let sending = in_state(Status::Sending).unwrap();
    let later = T0.plus(Duration::from_secs(30));
    let deferred = step(
        Some(&sending),
        Change::Defer {
            token: tok(1),
            next_eligible_at: later,
            class: OutcomeClass::Transient,
            error: None,
        },
    );
    let early = apply(Some(&deferred), claim(tok(2)), &ctx_at(T0));
    assert_eq!(early.unwrap_err().why, Why::NotYetEligible(later));
    let on_time = apply(Some(&deferred), claim(tok(2)), &ctx_at(later)).unwrap();
    assert_eq!(on_time.status(), Status::Sending);
    assert_eq!(on_time.attempt_count(), 1);
}

#[test]
fn takeover_only_after_the_lease_expired_and_only_of_the_named_lease() {
    let sending = in_state(Status::Sending).unwrap();
    let lease_end = sending.lease_expires_at().unwrap();
    let takeover = |stale, now| {
        apply(
            Some(&sending),
            Change::Takeover {
                stale_token: stale,
                token: tok(3),
                lease_expires_at: now,
            },
            &ctx_at(now),
        )
    };
    assert_eq!(
        takeover(tok(1), T0).unwrap_err().why,
        Why::LeaseLive(lease_end)
    );
    assert_eq!(
        takeover(tok(7), lease_end).unwrap_err().why,
        Why::WrongLease
    );
    let taken = takeover(tok(1), lease_end).unwrap();
    assert_eq!(taken.lease_token(), Some(&tok(3)));
    // The old worker can no longer write its outcome.
    let old = apply(
        Some(&taken),
        Change::Deliver {
            token: tok(1),
            receipt: None,
        },
        &ctx_at(lease_end),
    );
    assert_eq!(old.unwrap_err().why, Why::WrongLease);
}

#[test]
fn a_redrive_needs_the_ledgers_own_reason() {
    let dead = in_state(Status::Dead).unwrap();
    let reason = dead.dead_reason().unwrap();
    let others = DeadReason::ALL
        .into_iter()
        .filter(|r| *r != reason)
        .collect();
    let redrive = |reasons| Change::Redrive {
        audit: RedriveAudit {
            batch_id: "b".into(),
            operator: "op".into(),
            note: "".into(),
        },
        reasons,
    };
    let refused = apply(Some(&dead), redrive(others), &ctx_at(T0)).unwrap_err();
    assert_eq!(refused.why, Why::ReasonNotSelected(reason));
    let ready = apply(Some(&dead), redrive([reason].into()), &ctx_at(T0)).unwrap();
    assert_eq!(ready.status(), Status::Ready);
}

#[test]
fn only_the_lapsed_lease_holder_reconciles_an_ambiguous_death() {
    let sending = in_state(Status::Sending).unwrap();
    let dead = apply(
        Some(&sending),
        Change::Die {
            token: Some(tok(1)),
            reason: DeadReason::Ambiguous,
            spends_attempt: true,
            error: Some("lease_expired_without_outcome".into()),
            fallback_to: None,
            maybe_sent: false,
        },
        &ctx_at(LATER),
    )
    .unwrap();
    let reconcile = |t| Change::Reconcile {
        token: tok(t),
        receipt: Some("r-1".into()),
    };
    let other = apply(Some(&dead), reconcile(2), &ctx_at(LATER)).unwrap_err();
    assert_eq!(other.why, Why::WrongLease);
    let done = apply(Some(&dead), reconcile(1), &ctx_at(LATER)).unwrap();
    assert_eq!(done.status(), Status::Delivered);
    assert_eq!(done.dead_reason(), None);
    assert_eq!(done.provider_receipt(), Some("r-1"));
    // A death not under a lease (from deferred) has no one to reconcile it.
    let deferred = in_state(Status::Deferred).unwrap();
    let budget = apply(
        Some(&deferred),
        Change::Die {
            token: None,
            reason: DeadReason::ThrottleExhausted,
            spends_attempt: false,
            error: None,
            fallback_to: None,
            maybe_sent: false,
        },
        &ctx_at(LATER),
    )
    .unwrap();
    let refused = apply(Some(&budget), reconcile(1), &ctx_at(LATER)).unwrap_err();
    assert_eq!(refused.why, Why::NotAllowed);
}

#[test]
fn one_worker_at_a_time_copies_a_death_and_a_lapsed_claim_is_taken_over() {
    let dead = in_state(Status::Dead).unwrap();
    let claimed = apply(
        Some(&dead),
        Change::ClaimDlqCopy { token: tok(7) },
        &ctx_at(T0),
    )
    .unwrap();
    let again = apply(
        Some(&claimed),
        Change::ClaimDlqCopy { token: tok(7) },
        &ctx_at(T0),
    )
    .unwrap_err();
    assert_eq!(again.why, Why::NotAllowed, "held by the first worker");
    let lapsed = T0.plus(COPY_CLAIM_TIMEOUT);
    let taken = apply(
        Some(&claimed),
        Change::ClaimDlqCopy { token: tok(7) },
        &ctx_at(lapsed),
    )
    .unwrap();
    let copied = apply(Some(&taken), Change::CopiedToDlq, &ctx_at(lapsed)).unwrap();
    assert_eq!(copied.dlq_copied_at(), Some(lapsed));
    let after = apply(
        Some(&copied),
        Change::ClaimDlqCopy { token: tok(7) },
        &ctx_at(lapsed),
    )
    .unwrap_err();
    assert_eq!(after.why, Why::NotAllowed, "copied once");
}
