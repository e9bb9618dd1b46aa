//! Ledger contract: compare-and-set semantics, exact round trips, and the claim / outcome /
//! cancel operations on top (sequential: moto's conditions are not atomic across concurrent
//! requests, so concurrent claims are proven on the in-memory ledger, in the library tests).

use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use reminders::aws::dynamo::DynamoLedger;
use reminders::clock::Timestamp;
use reminders::delivery::{cancel, claim, transition, Cancelled, Claim, ClaimRequest, Written};
use reminders::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};
use reminders::ledger::{apply, Change, Ctx, LeaseToken, Status};
use reminders::policy::{OutcomeClass, RetryPolicy};
use reminders::ports::{Cas, Expected, Ledger, MemoryLedger};

use crate::common;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

fn ctx(reminder: &str, now: Timestamp) -> Ctx {
    Ctx {
        key: DeliveryKey::derive(
            &ReminderId::parse(reminder).unwrap(),
            &SubscriberId::parse("sub-1").unwrap(),
            Channel::Sms,
        ),
        now,
        expires_at: 1_900_000_000,
        origin: None,
    }
}

fn token(seed: u64) -> LeaseToken {
    LeaseToken::generate(&mut StdRng::seed_from_u64(seed))
}

fn claim_req(seed: u64, lease_until: Timestamp) -> ClaimRequest {
    ClaimRequest {
        token: token(seed),
        lease_expires_at: lease_until,
        payload_version: 2,
        policy: RetryPolicy::default(),
    }
}

async fn compare_and_set<L: Ledger>(ledger: &L) {
    let c = ctx("cas", T0);
    assert_eq!(ledger.get(&c.key).await.unwrap(), None);
    let first = apply(None, Change::Cancel, &c).unwrap();
    assert_eq!(
        ledger.put_if(&first, Expected::Absent).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(ledger.get(&c.key).await.unwrap().as_ref(), Some(&first));
    // Expecting absence now conflicts and returns the item, exactly.
    assert_eq!(
        ledger.put_if(&first, Expected::Absent).await.unwrap(),
        Cas::Conflict(Some(Box::new(first.clone())))
    );
    let wrong_seq = Expected::Version {
        seq: first.seq() + 1,
        status: first.status(),
        lease: first.lease_token().cloned(),
    };
    assert!(matches!(
        ledger.put_if(&first, wrong_seq).await.unwrap(),
        Cas::Conflict(Some(_))
    ));
    let wrong_status = Expected::Version {
        seq: first.seq(),
        status: Status::Ready,
        lease: first.lease_token().cloned(),
    };
    assert!(matches!(
        ledger.put_if(&first, wrong_status).await.unwrap(),
        Cas::Conflict(Some(_))
    ));
    assert_eq!(
        ledger
            .put_if(&first, Expected::of(Some(&first)))
            .await
            .unwrap(),
        Cas::Applied
    );
}

async fn claim_outcome_cycle<L: Ledger>(ledger: &L) {
    let lease = T0.plus(Duration::from_secs(30));
    let c = ctx("cycle", T0);
    let Claim::Acquired(sending) = claim(ledger, claim_req(1, lease), &c).await.unwrap() else {
        panic!("first claim must acquire")
    };
    assert_eq!(sending.status(), Status::Sending);
    assert_eq!(ledger.get(&c.key).await.unwrap().as_ref(), Some(&sending));
    // Another worker, same moment: held, with the lease end.
    assert_eq!(
        claim(ledger, claim_req(2, lease), &c).await.unwrap(),
        Claim::HeldByOther { until: lease }
    );
    let later = T0.plus(Duration::from_secs(10));
    let deferred = transition(
        ledger,
        Some(sending.clone()),
        Change::Defer {
            token: token(1),
            next_eligible_at: later,
            class: OutcomeClass::Throttled,
            error: Some("http_429".into()),
        },
        &ctx("cycle", T0),
    )
    .await
    .unwrap();
    let Written::Applied(deferred) = deferred else {
        panic!("lease holder's outcome must apply")
    };
    assert_eq!(deferred.throttle_count(), 1);
    // The first worker, still holding its old view (sending, its own lease), tries another
    // outcome: the conditional write on the transition number refuses it.
    let stale = transition(
        ledger,
        Some(sending.clone()),
        Change::Deliver {
            token: token(1),
            receipt: None,
        },
        &c,
    )
    .await
    .unwrap();
    match stale {
        Written::Refused { current, .. } => assert_eq!(current.as_ref(), Some(&deferred)),
        other => panic!("stale outcome must be refused, got {other:?}"),
    }
    assert_eq!(
        claim(ledger, claim_req(3, lease), &c).await.unwrap(),
        Claim::NotYetEligible { at: later }
    );
    let c_later = ctx("cycle", later);
    let Claim::Acquired(again) = claim(ledger, claim_req(4, lease), &c_later).await.unwrap() else {
        panic!("eligible deferred delivery must be claimable")
    };
    let done = transition(
        ledger,
        Some(again),
        Change::Deliver {
            token: token(4),
            receipt: Some("provider-id-1".into()),
        },
        &c_later,
    )
    .await
    .unwrap();
    let Written::Applied(delivered) = done else {
        panic!("deliver must apply")
    };
    assert_eq!(delivered.provider_receipt(), Some("provider-id-1"));
    assert_eq!(ledger.get(&c.key).await.unwrap().as_ref(), Some(&delivered));
    // A duplicate message: suppressed, and a cancel now answers "already delivered".
    assert!(matches!(
        claim(ledger, claim_req(5, lease), &c_later).await.unwrap(),
        Claim::AlreadyDelivered(_)
    ));
    assert_eq!(
        cancel(ledger, &c_later).await.unwrap(),
        Cancelled::AlreadyDelivered
    );
    let history: Vec<(Status, Status)> = delivered
        .history()
        .iter()
        .map(|(_, h)| (h.from, h.to))
        .collect();
    assert_eq!(
        history,
        [
            (Status::Scheduled, Status::Sending),
            (Status::Sending, Status::Deferred),
            (Status::Deferred, Status::Sending),
            (Status::Sending, Status::Delivered)
        ]
    );
}

async fn cancel_before_claim<L: Ledger>(ledger: &L) {
    let c = ctx("cancelled", T0);
    assert_eq!(cancel(ledger, &c).await.unwrap(), Cancelled::Cancelled);
    assert!(matches!(
        claim(ledger, claim_req(1, T0), &c).await.unwrap(),
        Claim::Finished(_)
    ));
    // A second, later cancel finds it final (an identical retry at the same instant is
    // indistinguishable from our own lost response, and answers `Cancelled`).
    assert_eq!(
        cancel(ledger, &ctx("cancelled", T0.plus(Duration::from_secs(1))))
            .await
            .unwrap(),
        Cancelled::AlreadyFinal(Status::Cancelled)
    );
}

/// A claim undone (the one-read path's give-back): deleted only at the version it names;
/// otherwise the current item comes back, and nothing changes. After it, the key reads as
/// never claimed, and a claim creates the item afresh.
async fn delete_at_version<L: Ledger>(ledger: &L) {
    let c = ctx("undone", T0);
    let got = claim(ledger, claim_req(7, T0.plus(Duration::from_secs(60))), &c)
        .await
        .unwrap();
    let Claim::Acquired(claimed) = got else {
        panic!("a first claim acquires: {got:?}")
    };
    assert_eq!(claimed.seq(), 1, "the claim created the item");
    let stale = Expected::Version {
        seq: 2,
        status: Status::Sending,
        lease: claimed.lease_token().cloned(),
    };
    assert_eq!(
        ledger.delete_if(&c.key, stale).await.unwrap(),
        Cas::Conflict(Some(Box::new(claimed.clone()))),
        "another version is not deleted, and is returned exactly"
    );
    assert_eq!(ledger.get(&c.key).await.unwrap().as_ref(), Some(&claimed));
    let exact = Expected::of(Some(&claimed));
    assert_eq!(
        ledger.delete_if(&c.key, exact.clone()).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(
        ledger.get(&c.key).await.unwrap(),
        None,
        "as if never claimed"
    );
    assert_eq!(
        ledger.delete_if(&c.key, exact.clone()).await.unwrap(),
        Cas::Conflict(None),
        "nothing left to delete"
    );
    let again = claim(ledger, claim_req(8, T0.plus(Duration::from_secs(60))), &c)
        .await
        .unwrap();
    let Claim::Acquired(reclaimed) = again else {
        panic!("a claim after the delete creates the item afresh: {again:?}")
    };
    assert_eq!(reclaimed.seq(), 1, "{reclaimed:?}");
    // A retried delete (its first answer lost) meets another worker's claim at the same
    // transition number and state: that claim is not the one it means, and stays.
    assert_eq!(
        ledger.delete_if(&c.key, exact.clone()).await.unwrap(),
        Cas::Conflict(Some(Box::new(reclaimed.clone()))),
        "a retried delete removes only the claim its writer read"
    );
    // So does any write that read the item before it was given back.
    assert!(matches!(
        ledger.put_if(&claimed, exact).await.unwrap(),
        Cas::Conflict(Some(_))
    ));
    assert_eq!(ledger.get(&c.key).await.unwrap().as_ref(), Some(&reclaimed));
}

async fn suite<L: Ledger>(ledger: &L) {
    compare_and_set(ledger).await;
    claim_outcome_cycle(ledger).await;
    cancel_before_claim(ledger).await;
    delete_at_version(ledger).await;
}

#[tokio::test]
async fn memory_ledger_meets_the_contract() {
    suite(&MemoryLedger::default()).await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn dynamodb_ledger_meets_the_contract() {
    let client = common::dynamo().await;
    let table = common::deliveries_table(&client).await;
    suite(&DynamoLedger::new(client, table)).await;
}

/// A deploy in progress: an item a newer version wrote, with an attribute this version does
/// not know at the top and one inside its origin. This version reads it, writes its next
/// transition, and both attributes are still there: a writer never drops what it does not
/// know.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn dynamodb_ledger_keeps_what_a_newer_version_wrote() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let client = common::dynamo().await;
    let table = common::deliveries_table(&client).await;
    let ledger = DynamoLedger::new(client.clone(), table.clone());
    let mut c = ctx("newer", T0);
    c.origin = Some(reminders::ledger::Origin {
        reminder_id: ReminderId::parse("newer").unwrap(),
        subscriber_id: SubscriberId::parse("sub-1").unwrap(),
        channel: Channel::Sms,
        fallback_from: None,
        chain_head: true,
        chain: vec![Channel::Push, Channel::Sms],
        unknown: Default::default(),
    });
    let got = claim(&ledger, claim_req(11, T0.plus(Duration::from_secs(60))), &c)
        .await
        .unwrap();
    let Claim::Acquired(claimed) = got else {
        panic!("{got:?}")
    };
    // What the newer writer added, beside what this version wrote.
    client
        .update_item()
        .table_name(&table)
        .key("delivery_key", AttributeValue::S(c.key.as_str().into()))
        .update_expression("SET newer_mark = :m, #o.newer_nested = :n, newer_blob = :b")
        .expression_attribute_names("#o", "origin")
        .expression_attribute_values(":m", AttributeValue::Bool(true))
        // A kind the map cannot hold: left out, never a reason to refuse the item.
        .expression_attribute_values(
            ":b",
            AttributeValue::B(aws_smithy_types::Blob::new(vec![1, 2, 3])),
        )
        .expression_attribute_values(":n", AttributeValue::N("7".into()))
        .send()
        .await
        .unwrap();
    let read = ledger.get(&c.key).await.unwrap().expect("the item");
    assert_eq!(
        read.unknown().get("newer_mark"),
        Some(&serde_json::json!(true)),
        "{read:?}"
    );
    let next = apply(
        Some(&read),
        Change::Deliver {
            token: token(11),
            receipt: None,
        },
        &c,
    )
    .unwrap();
    assert_eq!(
        ledger
            .put_if(&next, Expected::of(Some(&read)))
            .await
            .unwrap(),
        Cas::Applied
    );
    assert_ne!(claimed.seq(), next.seq());
    let raw = common::stored_item(&client, &table, ("delivery_key", c.key.as_str())).await;
    assert_eq!(
        raw.get("status"),
        Some(&AttributeValue::S("delivered".into()))
    );
    assert_eq!(
        raw.get("newer_mark"),
        Some(&AttributeValue::Bool(true)),
        "dropped by this version's write: {raw:?}"
    );
    let origin = raw.get("origin").and_then(|o| o.as_m().ok()).unwrap();
    assert_eq!(
        origin.get("newer_nested"),
        Some(&AttributeValue::N("7".into())),
        "dropped from the origin by this version's write: {origin:?}"
    );
    assert_eq!(origin.get("chain_head"), Some(&AttributeValue::Bool(true)));
}
