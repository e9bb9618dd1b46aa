//! Which ledger writes publish, and the event's exact shape.

use std::collections::BTreeSet;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;

use super::*;
use crate::clock::Timestamp;
use crate::domain::{Channel, DeadReason, DeliveryKey, ReminderId, SubscriberId};
use crate::ledger::{apply, Change, Ctx, LeaseToken, Origin, RedriveAudit};
use crate::policy::RetryPolicy;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

fn origin() -> Origin {
    Origin {
        reminder_id: ReminderId::parse("r-1").unwrap(),
        subscriber_id: SubscriberId::parse("u-42").unwrap(),
        channel: Channel::Email,
        fallback_from: None,
        chain_head: false,
        chain: Vec::new(),
        unknown: Default::default(),
    }
}

fn ctx(secs: u64, origin: Option<Origin>) -> Ctx {
    let o = self::origin();
    Ctx {
        key: DeliveryKey::derive(&o.reminder_id, &o.subscriber_id, o.channel),
        now: T0.plus(Duration::from_secs(secs)),
        expires_at: 1_900_000_000,
        origin,
    }
}

fn tok(n: u64) -> LeaseToken {
    LeaseToken::generate(&mut StdRng::seed_from_u64(n))
}

/// `changes` applied in turn from no item, with the origin known; every record on the way.
fn walk(changes: Vec<Change>) -> Vec<DeliveryRecord> {
    let mut out: Vec<DeliveryRecord> = Vec::new();
    for (i, change) in changes.into_iter().enumerate() {
        let next = apply(out.last(), change, &ctx(i as u64, Some(origin()))).unwrap();
        out.push(next);
    }
    out
}

fn claim(n: u64) -> Change {
    Change::Claim {
        token: tok(n),
        lease_expires_at: T0.plus(Duration::from_secs(600)),
        payload_version: 1,
        policy: RetryPolicy::default(),
    }
}

fn deliver(n: u64) -> Change {
    Change::Deliver {
        token: tok(n),
        receipt: Some("msg-1".into()),
    }
}

fn rejected(n: u64) -> Change {
    Change::Die {
        token: Some(tok(n)),
        reason: DeadReason::Rejected,
        spends_attempt: true,
        error: Some("http_400".into()),
        fallback_to: None,
        maybe_sent: false,
    }
}

#[test]
fn a_delivery_publishes_the_contracts_detail_exactly() {
    let r = walk(vec![claim(1), deliver(1)]);
    let event = settled(Some(&r[0]), &r[1]).expect("sending → delivered settles");
    let key = r[1].key().as_str().to_owned();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&event.detail_json()).unwrap(),
        json!({
            "version": 1,
            "reminder_id": "r-1",
            "subscriber_id": "u-42",
            "channel": "email",
            "delivery_key": key,
            "outcome": "delivered",
            "reason": null,
            "transition": 2,
            "from": "sending",
            "at": "2027-01-15T08:00:01.000Z",
            "attempts": 1,
            "fallback_from": null,
            "fallback_to": null,
            "series_id": null,
            "occurrence_at": null,
            "newer_values": []
        })
    );
}

/// An occurrence of a series: its event names the series and the occurrence's instant, read from
/// the reminder's id.
#[test]
fn an_occurrence_names_its_series_and_instant() {
    let mut o = origin();
    o.reminder_id = ReminderId::parse("standup::20270104T081500Z").unwrap();
    let c = Ctx {
        key: DeliveryKey::derive(&o.reminder_id, &o.subscriber_id, o.channel),
        origin: Some(o),
        ..ctx(0, None)
    };
    let claimed = apply(None, claim(1), &c).unwrap();
    let done = apply(Some(&claimed), deliver(1), &c).unwrap();
    let event = settled(Some(&claimed), &done).unwrap();
    let detail: serde_json::Value = serde_json::from_str(&event.detail_json()).unwrap();
    assert_eq!(detail["series_id"], "standup");
    assert_eq!(detail["occurrence_at"], "2027-01-04T08:15:00.000Z");
}

#[test]
fn each_settled_state_publishes_with_its_reason_only_when_dead() {
    let dead = walk(vec![claim(1), rejected(1)]);
    let e = settled(Some(&dead[0]), &dead[1]).unwrap();
    assert_eq!(
        (e.outcome, e.reason, e.from),
        (Status::Dead, Some(DeadReason::Rejected), Status::Sending)
    );
    // Written as the item's first write: from `scheduled`, with no old image.
    let cancelled = walk(vec![Change::Cancel]);
    let e = settled(None, &cancelled[0]).unwrap();
    assert_eq!(
        (e.outcome, e.from, e.transition, e.reason),
        (Status::Cancelled, Status::Scheduled, 1, None)
    );
    let expired = walk(vec![Change::Expire]);
    assert_eq!(settled(None, &expired[0]).unwrap().outcome, Status::Expired);
    // Cancelled while dead: the dead reason is gone from the item, and from the event.
    let cancelled_dead = walk(vec![claim(1), rejected(1), Change::Cancel]);
    let e = settled(Some(&cancelled_dead[1]), &cancelled_dead[2]).unwrap();
    assert_eq!(
        (e.outcome, e.from, e.reason),
        (Status::Cancelled, Status::Dead, None)
    );
}

#[test]
fn writes_that_do_not_settle_publish_nothing() {
    let r = walk(vec![
        claim(1),
        Change::Defer {
            token: tok(1),
            next_eligible_at: T0,
            class: crate::policy::OutcomeClass::Transient,
            error: None,
        },
    ]);
    assert_eq!(settled(None, &r[0]), None, "scheduled → sending");
    assert_eq!(settled(Some(&r[0]), &r[1]), None, "sending → deferred");
}

/// The planted check: a write that leaves a settled status as it was (the DLQ-copy
/// bookkeeping on a dead item, a TTL move on a delivered one) is no new outcome.
#[test]
fn a_write_with_an_unchanged_status_publishes_nothing() {
    let dead = walk(vec![
        claim(1),
        rejected(1),
        Change::ClaimDlqCopy { token: tok(7) },
        Change::CopiedToDlq,
    ]);
    assert!(
        settled(Some(&dead[0]), &dead[1]).is_some(),
        "the death itself"
    );
    assert_eq!(
        settled(Some(&dead[1]), &dead[2]),
        None,
        "dead → dead (claim copy)"
    );
    assert_eq!(
        settled(Some(&dead[2]), &dead[3]),
        None,
        "dead → dead (copied)"
    );
    // Without the old image, the item's own history says it was dead already.
    assert_eq!(settled(None, &dead[3]), None);
    let delivered = walk(vec![claim(1), deliver(1), Change::Extend]);
    assert_eq!(settled(Some(&delivered[1]), &delivered[2]), None);
    assert_eq!(settled(None, &delivered[2]), None);
}

#[test]
fn a_redriven_delivery_that_settles_again_publishes_a_new_transition() {
    let audit = RedriveAudit {
        batch_id: "b".into(),
        operator: "op".into(),
        note: "provider fixed".into(),
    };
    let reasons = BTreeSet::from([DeadReason::Rejected]);
    let r = walk(vec![
        claim(1),
        rejected(1),
        Change::Redrive { audit, reasons },
        claim(2),
        deliver(2),
    ]);
    let died = settled(Some(&r[0]), &r[1]).unwrap();
    assert_eq!(settled(Some(&r[1]), &r[2]), None, "dead → ready");
    let delivered = settled(Some(&r[3]), &r[4]).unwrap();
    assert_eq!((died.outcome, died.transition), (Status::Dead, 2));
    assert_eq!(
        (delivered.outcome, delivered.transition),
        (Status::Delivered, 5)
    );
    assert_eq!(died.delivery_key, delivered.delivery_key);
}

#[test]
fn an_item_without_origin_publishes_nulls_and_never_a_recipient() {
    let r = apply(None, Change::Cancel, &ctx(0, None)).unwrap();
    let detail: serde_json::Value =
        serde_json::from_str(&settled(None, &r).unwrap().detail_json()).unwrap();
    for field in ["reminder_id", "subscriber_id", "channel", "reason"] {
        assert_eq!(detail[field], serde_json::Value::Null, "{field}: {detail}");
    }
    let fields: BTreeSet<&str> = detail
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert!(
        !fields
            .iter()
            .any(|f| f.contains("recipient") || f.contains("content")),
        "{fields:?}"
    );
}
