//! A newer ledger writer, on the consumer: a ledger item whose `status` was written by a newer
//! version. This version refuses every change from it, so the item stays as it was; the
//! message is neither acked nor dead-lettered, but held for a reader that knows the status.

use std::time::Duration;

use reminders::consumer::Action;
use reminders::delivery::{self, Claim, ClaimRequest};
use reminders::domain::Channel;
use reminders::ledger::{Ctx, DeliveryRecord, LeaseToken, Origin, Status};
use reminders::policy::RetryPolicy;
use reminders::ports::{Cas, Expected, Ledger};

use crate::harness::{message, test_config, Mem, T0};

const PUSH: Channel = Channel::Push;

/// Store `r`'s push delivery as a newer writer left it: claimed, then in `paused_v9`.
async fn newer_item(w: &Mem, r: &reminders::domain::Reminder) -> DeliveryRecord {
    let msg = message(r, PUSH);
    let ctx = Ctx {
        key: msg.delivery_key.clone(),
        now: T0,
        expires_at: 1_900_000_000,
        origin: Some(Origin::of(&msg)),
    };
    let req = ClaimRequest {
        token: LeaseToken::generate(
            &mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(3),
        ),
        lease_expires_at: T0.plus(Duration::from_secs(60)),
        payload_version: r.payload_version,
        policy: RetryPolicy::default(),
    };
    let Claim::Acquired(claimed) = delivery::claim(&*w.ledger, req, &ctx).await.unwrap() else {
        panic!("a first claim is acquired")
    };
    let mut json = serde_json::to_value(&claimed).unwrap();
    json["status"] = "paused_v9".into();
    json["seq"] = 2.into();
    let newer: DeliveryRecord = serde_json::from_value(json).unwrap();
    let expected = Expected::Version {
        seq: 1,
        status: Status::Sending,
        lease: claimed.lease_token().cloned(),
    };
    let put = w.ledger.put_if(&newer, expected).await.unwrap();
    assert_eq!(put, Cas::Applied);
    newer
}

#[tokio::test]
async fn a_newer_status_on_the_ledger_is_left_alone_and_its_message_kept() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("newer", &[PUSH]).await;
    w.mark_enqueued(&r).await;
    let newer = newer_item(&w, &r).await;
    let msg = message(&r, PUSH);
    w.enqueue(&msg).await;

    // Fresh: the claim is refused; nothing sent, nothing written, the message held.
    let out = w.run(PUSH).await.expect("the message is visible");
    assert!(
        matches!(out.records[0].action, Action::Hold { .. }),
        "{out:?}"
    );
    assert_eq!(out.metrics.get(PUSH).newer_status, 1);
    assert_eq!(w.provider.total_calls(), 0);
    assert_eq!(w.record(&msg.delivery_key).await.as_ref(), Some(&newer));
    assert_eq!(w.queue.len(PUSH), 1, "the message is kept");
    assert!(w.dead_letters(PUSH).await.is_empty());
    assert!(w.run(PUSH).await.is_none(), "held, not visible at once");

    // Stale by its next look: the expiry is refused too, and the message still kept.
    w.advance(2 * 3600);
    let out = w.run(PUSH).await.expect("visible again after the hold");
    assert!(
        matches!(
            out.records[0].action,
            Action::Hold { .. } | Action::Reenqueued
        ),
        "{out:?}"
    );
    assert_eq!(out.metrics.get(PUSH).newer_status, 1);
    assert_eq!(out.metrics.get(PUSH).expired, 0);
    assert_eq!(w.record(&msg.delivery_key).await.as_ref(), Some(&newer));
    assert_eq!(w.queue.len(PUSH), 1, "the message is kept");
    assert_eq!(w.provider.total_calls(), 0);
}
