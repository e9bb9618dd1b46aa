use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;
use crate::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};
use crate::ports::MemoryLedger;

const T0: Timestamp = Timestamp::from_millis(5_000_000);

fn ctx(now: Timestamp) -> Ctx {
    Ctx {
        key: DeliveryKey::derive(
            &ReminderId::parse("r").unwrap(),
            &SubscriberId::parse("s").unwrap(),
            Channel::Email,
        ),
        now,
        expires_at: 9_999,
        origin: None,
    }
}

fn req(seed: u64) -> ClaimRequest {
    ClaimRequest {
        token: LeaseToken::generate(&mut StdRng::seed_from_u64(seed)),
        lease_expires_at: T0.plus(Duration::from_secs(30)),
        payload_version: 1,
        policy: RetryPolicy::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_have_exactly_one_winner() {
    for round in 0..20u64 {
        let ledger = Arc::new(MemoryLedger::default());
        let mut tasks = Vec::new();
        for worker in 0..16u64 {
            let ledger = ledger.clone();
            tasks.push(tokio::spawn(async move {
                claim(&*ledger, req(round * 100 + worker), &ctx(T0)).await
            }));
        }
        let mut acquired = 0;
        for t in tasks {
            match t.await.unwrap().unwrap() {
                Claim::Acquired(_) => acquired += 1,
                Claim::HeldByOther { .. } => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(acquired, 1, "round {round}");
    }
}

#[tokio::test]
async fn claim_classifies_every_existing_state() {
    let ledger = MemoryLedger::default();
    let Claim::Acquired(rec) = claim(&ledger, req(1), &ctx(T0)).await.unwrap() else {
        panic!()
    };
    let later = T0.plus(Duration::from_secs(60));
    assert!(matches!(
        claim(&ledger, req(2), &ctx(later)).await.unwrap(),
        Claim::LeaseExpired(_)
    ));
    let deferred = transition(
        &ledger,
        Some(rec),
        Change::Defer {
            token: req(1).token,
            next_eligible_at: later,
            class: crate::policy::OutcomeClass::Transient,
            error: None,
        },
        &ctx(T0),
    )
    .await
    .unwrap();
    let Written::Applied(deferred) = deferred else {
        panic!()
    };
    assert_eq!(
        claim(&ledger, req(3), &ctx(T0)).await.unwrap(),
        Claim::NotYetEligible { at: later }
    );
    // Two writes: the first (expecting no item) conflicts and returns the item.
    let Claim::Acquired(again) = claim(&ledger, req(3), &ctx(later)).await.unwrap() else {
        panic!()
    };
    assert_eq!(again.seq(), deferred.seq() + 1);
    let delivered = transition(
        &ledger,
        Some(again),
        Change::Deliver {
            token: req(3).token,
            receipt: Some("id-1".into()),
        },
        &ctx(later),
    )
    .await
    .unwrap();
    assert!(matches!(delivered, Written::Applied(_)));
    assert!(matches!(
        claim(&ledger, req(4), &ctx(later)).await.unwrap(),
        Claim::AlreadyDelivered(_)
    ));
    assert_eq!(
        cancel(&ledger, &ctx(later)).await.unwrap(),
        Cancelled::AlreadyDelivered
    );
}

#[tokio::test]
async fn cancel_wins_or_loses_against_a_claim_never_both() {
    let ledger = MemoryLedger::default();
    assert_eq!(
        cancel(&ledger, &ctx(T0)).await.unwrap(),
        Cancelled::Cancelled
    );
    assert!(matches!(
        claim(&ledger, req(1), &ctx(T0)).await.unwrap(),
        Claim::Finished(_)
    ));
    let other = MemoryLedger::default();
    claim(&other, req(1), &ctx(T0)).await.unwrap();
    assert_eq!(
        cancel(&other, &ctx(T0)).await.unwrap(),
        Cancelled::AlreadyInFlight
    );
}

#[tokio::test]
async fn a_stale_worker_cannot_overwrite_after_a_takeover() {
    let ledger = MemoryLedger::default();
    let Claim::Acquired(first) = claim(&ledger, req(1), &ctx(T0)).await.unwrap() else {
        panic!()
    };
    let later = T0.plus(Duration::from_secs(60));
    let Claim::LeaseExpired(seen) = claim(&ledger, req(2), &ctx(later)).await.unwrap() else {
        panic!()
    };
    let taken = transition(
        &ledger,
        Some(seen),
        Change::Takeover {
            stale_token: req(1).token,
            token: req(2).token,
            lease_expires_at: later.plus(Duration::from_secs(30)),
        },
        &ctx(later),
    )
    .await
    .unwrap();
    assert!(matches!(taken, Written::Applied(_)));
    let stale = transition(
        &ledger,
        Some(first),
        Change::Deliver {
            token: req(1).token,
            receipt: None,
        },
        &ctx(later),
    )
    .await
    .unwrap();
    assert!(matches!(stale, Written::Refused { .. }));
}

/// A death, then an edit's horizon move landing on the dead item before the worker that
/// recorded the death claims its DLQ copy: the claim, refused on its condition, is made again on
/// the item as it now is (still that death, not copied, no claim), so the copy is made. Before,
/// the claim was refused as stale and the message acknowledged with no copy in the DLQ.
#[tokio::test]
async fn a_horizon_move_between_a_death_and_its_copy_claim_leaves_the_copy_to_be_made() {
    let ledger = MemoryLedger::default();
    let c = ctx(T0);
    let dead = dead_item(&ledger).await;
    // The edit's horizon move, from its own read of the item.
    let mut later = ctx(T0.plus(Duration::from_secs(1)));
    later.expires_at = c.expires_at + 3_600;
    let moved = transition(&ledger, Some(dead.clone()), Change::Extend, &later).await;
    assert!(matches!(moved, Ok(Written::Applied(_))), "{moved:?}");
    // The worker's copy claim, from the item as its death left it.
    let got = transition(&ledger, Some(dead.clone()), copy_claim(9), &later)
        .await
        .unwrap();
    let Written::Applied(claimed_copy) = got else {
        panic!("the copy claim was refused after a horizon move: {got:?}")
    };
    assert_eq!(claimed_copy.dead_at(), dead.dead_at());
    // Its record, from the claimed item, as the worker makes it after the copy.
    let recorded = transition(&ledger, Some(claimed_copy), Change::CopiedToDlq, &later)
        .await
        .unwrap();
    assert!(
        matches!(recorded, Written::Applied(ref r) if r.dlq_copied_at().is_some()),
        "{recorded:?}"
    );
}

/// A delivery claimed and dead as `rejected` at [`T0`]: the record as the death left it.
async fn dead_item(ledger: &MemoryLedger) -> DeliveryRecord {
    let c = ctx(T0);
    let Claim::Acquired(claimed) = claim(ledger, req(1), &c).await.unwrap() else {
        panic!("the first claim acquires")
    };
    let die = Change::Die {
        token: claimed.lease_token().cloned(),
        reason: crate::domain::DeadReason::Rejected,
        spends_attempt: true,
        error: Some("400".into()),
        fallback_to: None,
        maybe_sent: false,
    };
    match transition(ledger, Some(claimed), die, &c).await.unwrap() {
        Written::Applied(dead) => dead,
        other => panic!("the death lands: {other:?}"),
    }
}

fn copy_claim(seed: u64) -> Change {
    Change::ClaimDlqCopy {
        token: LeaseToken::generate(&mut StdRng::seed_from_u64(seed)),
    }
}

/// A copy claim that landed with its answer lost, an edit's horizon move landing next, then the
/// SDK sending the claim again: the item holds this worker's own claim, so the claim is its own
/// (not another worker's, which would leave the copy unmade until the claim lapsed).
#[tokio::test]
async fn a_copy_claim_sent_again_after_a_horizon_move_finds_its_own_claim() {
    let ledger = MemoryLedger::default();
    let dead = dead_item(&ledger).await;
    let c = ctx(T0.plus(Duration::from_secs(1)));
    let first = transition(&ledger, Some(dead.clone()), copy_claim(9), &c).await;
    assert!(matches!(first, Ok(Written::Applied(_))), "{first:?}");
    let Ok(Some(claimed)) = ledger.get(&c.key).await else {
        panic!("the claimed item")
    };
    let mut later = c.clone();
    later.expires_at = c.expires_at + 3_600;
    let moved = transition(&ledger, Some(claimed), Change::Extend, &later).await;
    assert!(matches!(moved, Ok(Written::Applied(_))), "{moved:?}");
    // The same write again, from the same read: the SDK's retry.
    let again = transition(&ledger, Some(dead), copy_claim(9), &c)
        .await
        .unwrap();
    assert!(
        matches!(again, Written::Applied(ref r) if r.dlq_copy_claim().is_some()),
        "the retried claim was not recognised as this worker's: {again:?}"
    );
}

/// Two workers copying one death, the second after the first's claim landed: the second's claim,
/// made again on the item as it is, is refused (the copy is the first's), so one copy is made.
#[tokio::test]
async fn of_two_workers_copying_one_death_only_the_first_claims_the_copy() {
    let ledger = MemoryLedger::default();
    let dead = dead_item(&ledger).await;
    let c = ctx(T0.plus(Duration::from_secs(1)));
    let a = transition(&ledger, Some(dead.clone()), copy_claim(9), &c).await;
    assert!(matches!(a, Ok(Written::Applied(_))), "{a:?}");
    let b = transition(&ledger, Some(dead), copy_claim(10), &c)
        .await
        .unwrap();
    assert!(matches!(b, Written::Refused { .. }), "{b:?}");
}

/// The copy made, then an edit's horizon move landing before the worker records it: the record,
/// made under the claim the item still holds, is made again on the item as it is. Refused, the
/// copy would stay unrecorded, and once the claim lapsed a later message would copy it again.
#[tokio::test]
async fn a_horizon_move_between_the_copy_and_its_record_leaves_one_copy_recorded() {
    let ledger = MemoryLedger::default();
    let dead = dead_item(&ledger).await;
    let c = ctx(T0.plus(Duration::from_secs(1)));
    let Written::Applied(claimed) = transition(&ledger, Some(dead), copy_claim(9), &c)
        .await
        .unwrap()
    else {
        panic!("the claim lands")
    };
    let mut later = c.clone();
    later.expires_at = c.expires_at + 3_600;
    let moved = transition(&ledger, Some(claimed.clone()), Change::Extend, &later).await;
    assert!(matches!(moved, Ok(Written::Applied(_))), "{moved:?}");
    let recorded = transition(&ledger, Some(claimed), Change::CopiedToDlq, &c)
        .await
        .unwrap();
    assert!(
        matches!(recorded, Written::Applied(ref r) if r.dlq_copied_at().is_some()),
        "the copy's record was refused after a horizon move: {recorded:?}"
    );
}
