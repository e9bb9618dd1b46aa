//! The handler on the in-memory bus: what publishes, and which records a failure reports.

use std::time::Duration;

use aws_lambda_events::event::dynamodb::EventRecord;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;
use crate::clock::Timestamp;
use crate::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};
use crate::ledger::{apply, Change, Ctx, LeaseToken, Origin};
use crate::policy::RetryPolicy;
use crate::ports::MemoryBus;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

fn origin(reminder: &str) -> Origin {
    Origin {
        reminder_id: ReminderId::parse(reminder).unwrap(),
        subscriber_id: SubscriberId::parse("u-1").unwrap(),
        channel: Channel::Sms,
        fallback_from: None,
        chain_head: false,
        chain: Vec::new(),
        unknown: Default::default(),
    }
}

fn ctx(reminder: &str) -> Ctx {
    let o = origin(reminder);
    Ctx {
        key: DeliveryKey::derive(&o.reminder_id, &o.subscriber_id, o.channel),
        now: T0,
        expires_at: 1_900_000_000,
        origin: Some(o),
    }
}

fn image(r: &DeliveryRecord) -> serde_dynamo::Item {
    serde_dynamo::to_item(r).unwrap()
}

/// The stream record of one write: `old → new`, sequence number `seq`.
fn record(seq: u32, old: Option<&DeliveryRecord>, new: &DeliveryRecord) -> EventRecord {
    let mut r = EventRecord::default();
    r.event_name = if old.is_some() { "MODIFY" } else { "INSERT" }.into();
    r.change.sequence_number = Some(format!("{seq:021}"));
    r.change.keys = [(
        "delivery_key".to_owned(),
        serde_dynamo::AttributeValue::S(new.key().as_str().to_owned()),
    )]
    .into_iter()
    .collect::<std::collections::HashMap<_, _>>()
    .into();
    r.change.new_image = image(new);
    r.change.old_image = old.map(image).unwrap_or_default();
    r
}

/// A cancel (settles, from nothing) for reminder `id`.
fn cancelled(id: &str) -> DeliveryRecord {
    apply(None, Change::Cancel, &ctx(id)).unwrap()
}

/// A claim (settles nothing) for reminder `id`.
fn claimed(id: &str) -> DeliveryRecord {
    let claim = Change::Claim {
        token: LeaseToken::generate(&mut StdRng::seed_from_u64(1)),
        lease_expires_at: T0.plus(Duration::from_secs(60)),
        payload_version: 1,
        policy: RetryPolicy::default(),
    };
    apply(None, claim, &ctx(id)).unwrap()
}

fn failures(h: &Handled) -> Vec<String> {
    h.response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone().unwrap_or_default())
        .collect()
}

fn seqs(from: u32, to: u32) -> Vec<String> {
    (from..=to).map(|s| format!("{s:021}")).collect()
}

#[tokio::test]
async fn a_settled_write_publishes_and_an_unsettled_one_does_not() {
    let bus = MemoryBus::default();
    let batch = [
        record(1, None, &cancelled("a")),
        record(2, None, &claimed("b")),
    ];
    let h = handle(&bus, &batch).await;
    assert_eq!((h.published, h.quiet, h.failed_from), (1, 1, None));
    assert!(failures(&h).is_empty());
    let published = bus.published();
    assert_eq!(published.len(), 1);
    assert_eq!(
        published[0].reminder_id,
        Some(ReminderId::parse("a").unwrap())
    );
}

#[tokio::test]
async fn a_refused_event_fails_its_record_and_every_later_one() {
    let bus = MemoryBus::default();
    let refused = cancelled("b");
    bus.refuse(refused.key().clone());
    let batch = [
        record(1, None, &cancelled("a")),
        record(2, None, &claimed("x")),
        record(3, None, &refused),
        record(4, None, &cancelled("c")),
        record(5, None, &claimed("y")),
    ];
    let h = handle(&bus, &batch).await;
    assert_eq!(failures(&h), seqs(3, 5));
    assert_eq!((h.failed_from, h.published, h.quiet), (Some(2), 1, 1));
}

#[tokio::test]
async fn a_failed_call_fails_every_record_from_the_first_event() {
    let batch = [
        record(1, None, &claimed("x")),
        record(2, None, &cancelled("a")),
        record(3, None, &cancelled("b")),
    ];
    let h = handle(&crate::ports::events::Unreachable, &batch).await;
    assert_eq!(failures(&h), seqs(2, 3));
    assert_eq!((h.failed_from, h.published), (Some(1), 0));
}

/// An item that is not a ledger item this version or a newer one writes (no `seq`: a newer
/// status is read, not this) is quarantined in the log and never blocks the records after it:
/// retrying could never make it readable.
#[tokio::test]
async fn an_undecodable_item_is_skipped_and_the_records_after_it_publish() {
    let bus = MemoryBus::default();
    let mut bad = record(2, None, &cancelled("b"));
    bad.change.new_image.remove("seq");
    let batch = [
        record(1, None, &cancelled("a")),
        bad,
        record(3, None, &cancelled("c")),
    ];
    let h = handle(&bus, &batch).await;
    assert!(failures(&h).is_empty(), "{:?}", failures(&h));
    assert_eq!((h.failed_from, h.published, h.unreadable), (None, 2, 1));
    let published: Vec<_> = bus.published().into_iter().map(|e| e.reminder_id).collect();
    let id = |s: &str| Some(ReminderId::parse(s).unwrap());
    assert_eq!(published, vec![id("a"), id("c")]);
}

/// A newer writer's ledger `status` this events function does not know. The transition is
/// published with the status as written, under its delivery key and transition number,
/// `newer_values` naming it; the records after it publish too.
#[tokio::test]
async fn a_status_from_a_newer_writer_is_published_not_skipped() {
    use serde_dynamo::AttributeValue as A;
    let bus = MemoryBus::default();
    let before = claimed("b");
    let mut newer = record(2, Some(&before), &before);
    newer
        .change
        .new_image
        .insert("status".into(), A::S("paused_v9".into()));
    newer
        .change
        .new_image
        .insert("seq".into(), A::N("2".into()));
    let batch = [
        record(1, None, &cancelled("a")),
        newer,
        record(3, None, &cancelled("c")),
    ];
    let h = handle(&bus, &batch).await;
    assert!(failures(&h).is_empty(), "{:?}", failures(&h));
    assert_eq!((h.published, h.unreadable, h.newer), (3, 0, 1));
    let event = bus.published()[1].clone();
    assert_eq!((&event.delivery_key, event.transition), (before.key(), 2));
    assert_eq!(event.outcome.as_str(), "paused_v9");
    assert_eq!(event.from, crate::ledger::Status::Sending);
    let detail: serde_json::Value = serde_json::from_str(&event.detail_json()).unwrap();
    assert_eq!(detail["outcome"], "paused_v9", "{detail}");
    assert_eq!(
        detail["newer_values"],
        serde_json::json!(["outcome"]),
        "{detail}"
    );
    assert_eq!(detail["reminder_id"], "b", "{detail}");
}

#[tokio::test]
async fn removals_and_gate_items_publish_nothing() {
    let bus = MemoryBus::default();
    let mut removed = record(1, None, &cancelled("a"));
    removed.event_name = "REMOVE".into();
    removed.change.old_image = std::mem::take(&mut removed.change.new_image);
    let mut gate = EventRecord::default();
    gate.event_name = "MODIFY".into();
    gate.change.sequence_number = Some("2".into());
    gate.change.keys.insert(
        "delivery_key".into(),
        serde_dynamo::AttributeValue::S("gate#sms#default".into()),
    );
    let h = handle(&bus, &[removed, gate]).await;
    assert_eq!((h.published, h.quiet, h.failed_from), (0, 2, None));
    assert!(bus.published().is_empty());
}

/// A consumer of a newer version writes values this events function does not know (a dead reason,
/// an outcome class, a backoff, an ambiguous rule). The item is read, its event published with
/// the reason as written, and the values survive a write back; nothing is skipped.
#[tokio::test]
async fn values_from_a_newer_writer_are_published_and_carried_on() {
    use serde_dynamo::AttributeValue as A;
    let bus = MemoryBus::default();
    let before = claimed("n");
    let mut rec = record(1, Some(&before), &before);
    let new = &mut rec.change.new_image;
    new.insert("status".into(), A::S("dead".into()));
    new.insert("seq".into(), A::N("2".into()));
    new.insert("dead_reason".into(), A::S("bounced_after_send".into()));
    new.insert("last_outcome_class".into(), A::S("bounced".into()));
    let Some(A::M(policy)) = new.get_mut("policy") else {
        panic!("a claim snapshots its policy")
    };
    policy.insert("ambiguous".into(), A::S("ask_the_provider".into()));
    let backoff = [
        ("kind".to_owned(), A::S("decorrelated".into())),
        ("spread_secs".to_owned(), A::N("7".into())),
    ];
    policy.insert("backoff".into(), A::M(backoff.into_iter().collect()));

    let h = handle(&bus, &[rec.clone()]).await;
    assert_eq!((h.published, h.unreadable), (1, 0), "{h:?}");
    let event = &bus.published()[0];
    assert_eq!(event.outcome, crate::ledger::Status::Dead);
    assert_eq!(event.reason.map(|r| r.as_str()), Some("bounced_after_send"));
    let detail: serde_json::Value = serde_json::from_str(&event.detail_json()).unwrap();
    assert_eq!(detail["reason"], "bounced_after_send", "{detail}");

    // Read and written back by this version: every value as the newer one wrote it.
    let read: DeliveryRecord = serde_dynamo::from_item(rec.change.new_image.clone()).unwrap();
    let again = image(&read);
    for field in ["dead_reason", "last_outcome_class", "policy"] {
        assert_eq!(again.get(field), rec.change.new_image.get(field), "{field}");
    }
    assert!(!read.dead_reason().unwrap().falls_back());
}

/// Channels a newer writer added (the delivery's own, and the one its death fell back to). The
/// event is published with each as written, `newer_values` naming them, under the delivery key
/// and transition; nothing is skipped.
#[tokio::test]
async fn channels_from_a_newer_writer_are_published_as_written() {
    use serde_dynamo::AttributeValue as A;
    let bus = MemoryBus::default();
    let mut rec = record(1, None, &cancelled("w"));
    let new = &mut rec.change.new_image;
    let Some(A::M(origin)) = new.get_mut("origin") else {
        panic!("a cancel names its origin")
    };
    origin.insert("channel".into(), A::S("whatsapp".into()));
    new.insert("fallback_to".into(), A::S("carrier_pigeon".into()));

    let h = handle(&bus, &[rec, record(2, None, &cancelled("x"))]).await;
    assert!(failures(&h).is_empty(), "{:?}", failures(&h));
    assert_eq!((h.published, h.unreadable, h.newer), (2, 0, 1));
    let event = &bus.published()[0];
    assert_eq!((event.transition, event.outcome.as_str()), (1, "cancelled"));
    let detail: serde_json::Value = serde_json::from_str(&event.detail_json()).unwrap();
    assert_eq!(detail["channel"], "whatsapp", "{detail}");
    assert_eq!(detail["fallback_to"], "carrier_pigeon", "{detail}");
    assert_eq!(
        detail["newer_values"],
        serde_json::json!(["channel", "fallback_to"]),
        "{detail}"
    );
    assert_eq!(bus.published()[1].channel, Some("sms"));
}
