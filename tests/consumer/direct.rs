//! The one-read path (`consumer::steps::direct`) on in-memory ports: which messages take it
//! (`one_read`), which give their claim back (`one_read_released`) and what the two-read path
//! then decides — the same as for a message without the marks, with nothing spent by the claim
//! given back.

use std::time::Duration;

use reminders::consumer::{Action, BatchOutcome};
use reminders::domain::{
    AddressHash, Channel, Content, DeadReason, DeliveryMessage, Preferences, RedriveMarker,
    Reminder, ReminderStatus, Suppression, SuppressionKey, SuppressionSource,
};
use reminders::ledger::Status;
use reminders::ports::{Gate, Provider, ReminderStore};
use reminders::reminder_writes::{Edit, Edited};

use crate::harness::{message, sole_message, suppression_key, test_config, Mem, T0};

const SMS: Channel = Channel::Sms;

/// The path counters of one poll on `channel`: (one_read, one_read_released).
fn path(out: &BatchOutcome, channel: Channel) -> (u32, u32) {
    let m = out.metrics.get(channel);
    (m.one_read, m.one_read_released)
}

fn actions(out: &BatchOutcome) -> Vec<Action> {
    out.records.iter().map(|r| r.action).collect()
}

/// A world with one single-channel SMS reminder, and `msg(reminder)` enqueued and polled once.
async fn polled(
    msg: impl FnOnce(&Reminder) -> DeliveryMessage,
) -> (Mem, DeliveryMessage, BatchOutcome) {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("direct", &[SMS]).await;
    let m = msg(&r);
    w.enqueue(&m).await;
    let out = w.run(SMS).await.expect("the message was received");
    (w, m, out)
}

async fn status(w: &Mem, m: &DeliveryMessage) -> Option<Status> {
    w.record(&m.delivery_key).await.map(|r| r.status())
}

#[tokio::test]
async fn a_sole_message_is_delivered_once_in_one_read() {
    let (w, m, out) = polled(|r| sole_message(r, SMS)).await;
    assert_eq!(path(&out, SMS), (1, 0));
    assert_eq!(actions(&out), [Action::Ack]);
    assert_eq!(out.metrics.get(SMS).delivered, 1);
    assert_eq!(w.provider.calls_for(&m.delivery_key), 1);
    let rec = w.record(&m.delivery_key).await.unwrap();
    assert_eq!((rec.status(), rec.attempt_count()), (Status::Delivered, 1));
}

#[tokio::test]
async fn a_hash_under_another_key_is_given_back_and_delivered_by_two_reads() {
    let other = SuppressionKey::new(b"a key the consumer does not hold".to_vec()).unwrap();
    let (w, m, out) = polled(|r| {
        let hash = AddressHash::of(&other, &r.recipients[&SMS]);
        message(r, SMS).sole(Some(hash))
    })
    .await;
    assert_eq!(path(&out, SMS), (1, 1), "claimed, then given back");
    assert_eq!(out.metrics.get(SMS).delivered, 1);
    assert_eq!(w.provider.calls_for(&m.delivery_key), 1, "sent once");
    let rec = w.record(&m.delivery_key).await.unwrap();
    assert_eq!(
        (rec.status(), rec.attempt_count()),
        (Status::Delivered, 1),
        "the claim given back spent no attempt"
    );
}

/// Edited after its message was made: the message's version is not the reminder's. The
/// claim goes back, and the two-read path sends the edit (version 2), or waits for its
/// new due time.
#[tokio::test]
async fn an_edit_after_the_message_is_given_back_and_the_edit_decides() {
    // New content: sent once, as version 2.
    let w = Mem::new(test_config(), true);
    let r = w.reminder("edited", &[SMS]).await;
    let m = sole_message(&r, SMS);
    let content = Content::Text {
        subject: "Pickup".into(),
        body: "Your order moved to another counter".into(),
    };
    let edit = Edit {
        content: Some(content.clone()),
        ..Edit::default()
    };
    let Edited::Edited(v2) = w.edit(&r.reminder_id, edit).await.unwrap() else {
        panic!("edit refused")
    };
    assert_eq!(v2.payload_version, 2);
    w.enqueue(&m).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(path(&out, SMS), (1, 1));
    assert_eq!(
        w.provider.versions_for(&m.delivery_key),
        [2],
        "the edit, not the old version"
    );
    assert_eq!(status(&w, &m).await, Some(Status::Delivered));

    // Moved ten minutes later: held until then, nothing sent now.
    let w = Mem::new(test_config(), true);
    let r = w.reminder("moved", &[SMS]).await;
    let m = sole_message(&r, SMS);
    let later = Edit {
        due_at: Some(T0.plus(Duration::from_secs(600))),
        fresh_until: Some(r.fresh_until.plus(Duration::from_secs(600))),
        ..Edit::default()
    };
    assert!(matches!(
        w.edit(&r.reminder_id, later).await.unwrap(),
        Edited::Edited(_)
    ));
    w.enqueue(&m).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(path(&out, SMS), (1, 1));
    let [Action::Hold { secs }] = actions(&out)[..] else {
        panic!("{:?}", out.records)
    };
    assert!((599..=601).contains(&secs), "held {secs}s");
    assert_eq!(w.provider.calls_for(&m.delivery_key), 0);
    w.advance(601);
    w.run_until_idle(SMS, 30, 10).await;
    assert_eq!(w.provider.versions_for(&m.delivery_key), [2]);
}

/// Cancelled in the reminders table only (the ledger not told): the one read finds it
/// cancelled, gives the claim back, and the two-read path cancels the delivery.
#[tokio::test]
async fn a_reminder_cancelled_in_the_store_is_never_sent() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("cancelled", &[SMS]).await;
    let m = sole_message(&r, SMS);
    let marked = w
        .store
        .mark(&r.reminder_id, r.payload_version, ReminderStatus::Cancelled)
        .await
        .unwrap();
    assert_eq!(marked, reminders::ports::Marked::Marked);
    w.enqueue(&m).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(path(&out, SMS), (1, 1));
    assert_eq!(actions(&out), [Action::Ack]);
    assert_eq!(w.provider.total_calls(), 0);
    let rec = w.record(&m.delivery_key).await.unwrap();
    assert_eq!((rec.status(), rec.attempt_count()), (Status::Cancelled, 0));
}

fn fallback(order: &[Channel]) -> Preferences {
    let order: Vec<&str> = order.iter().map(|c| c.as_str()).collect();
    serde_json::from_value(serde_json::json!({ "fallback": order })).unwrap()
}

/// What became of an SMS message (sole or plain) of a reminder listing push and SMS, with the
/// subscriber's order putting push first: polled once, then push delivered, then SMS again.
struct TwoChannels {
    first: BatchOutcome,
    sms_calls: u32,
    push_calls: u32,
    sms_status: Option<Status>,
}

async fn two_channels(sole: bool, order: Option<&[Channel]>) -> TwoChannels {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("two", &[Channel::Push, SMS]).await;
    if let Some(order) = order {
        let prefs = fallback(order);
        w.store
            .put_preferences(&r.subscriber_id, &prefs)
            .await
            .unwrap();
    }
    let sms = match sole {
        // Marked sole by mistake (or by a scheduler that read another reminder).
        true => sole_message(&r, SMS),
        false => message(&r, SMS),
    };
    w.enqueue(&sms).await;
    let first = w.run(SMS).await.unwrap();
    let push = message(&r, Channel::Push);
    w.enqueue(&push).await;
    w.run_until_idle(Channel::Push, 30, 10).await;
    w.advance(3600 / 2);
    w.run_until_idle(SMS, 60, 40).await;
    TwoChannels {
        first,
        sms_calls: w.provider.calls_for(&sms.delivery_key),
        push_calls: w.provider.calls_for(&push.delivery_key),
        sms_status: w.record(&sms.delivery_key).await.map(|r| r.status()),
    }
}

#[tokio::test]
async fn a_sole_mark_on_a_reminder_of_two_channels_is_given_back() {
    // No fallback order: each channel on its own, SMS sent once either way.
    let plain = two_channels(false, None).await;
    let sole = two_channels(true, None).await;
    assert_eq!(path(&plain.first, SMS), (0, 0));
    assert_eq!(path(&sole.first, SMS), (1, 1), "claimed, then given back");
    for ran in [&plain, &sole] {
        assert_eq!((ran.sms_calls, ran.push_calls), (1, 1));
        assert_eq!(ran.sms_status, Some(Status::Delivered));
    }
}

/// With push ahead of SMS in the order, SMS is in standby: it waits for push, and push
/// delivered, is never sent. A sole mark must not change that (the claim it makes and gives
/// back must not let SMS past its standby step).
///
/// It did, before the give-back deleted the item its claim created: a released claim left SMS
/// a `ready` ledger item (naming its origin) where the two-read path leaves none, and the
/// standby step lets a channel with an item of its own go on, so SMS was sent ahead of push
/// (and push, once SMS delivered, was not). Reachable when an edit adds a channel ahead of a
/// single-channel reminder's after its sole message was enqueued.
#[tokio::test]
async fn a_sole_mark_on_a_standby_channel_does_not_send_it() {
    let order = [Channel::Push, SMS];
    let plain = two_channels(false, Some(&order)).await;
    let sole = two_channels(true, Some(&order)).await;
    assert_eq!(path(&plain.first, SMS), (0, 0));
    assert_eq!(path(&sole.first, SMS), (1, 1), "claimed, then given back");
    for (name, ran) in [("plain", &plain), ("sole", &sole)] {
        assert_eq!(
            ran.first.metrics.get(SMS).standby_held,
            1,
            "{name}: waits for push"
        );
        assert_eq!((ran.sms_calls, ran.push_calls), (0, 1), "{name}");
    }
}

/// How the bug above is reached: an SMS-only reminder is enqueued (its message sole), then
/// edited to add push, with the subscriber's order putting push first. Read after the edit,
/// SMS is in standby behind push; with the plain message it waits, and push is sent.
async fn edited_to_two(sole: bool) -> (u32, u32) {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("grown", &[SMS]).await;
    let sms = match sole {
        true => sole_message(&r, SMS),
        false => message(&r, SMS),
    };
    w.mark_enqueued(&r).await;
    let prefs = fallback(&[Channel::Push, SMS]);
    w.store
        .put_preferences(&r.subscriber_id, &prefs)
        .await
        .unwrap();
    let push_to = reminders::domain::Recipient::parse(Channel::Push, "device-token-1").unwrap();
    let add = Edit {
        recipients: Some(vec![push_to, r.recipients[&SMS].clone()]),
        ..Edit::default()
    };
    let Edited::Edited(v2) = w.edit(&r.reminder_id, add).await.unwrap() else {
        panic!("edit refused")
    };
    w.enqueue(&sms).await;
    w.run(SMS).await.unwrap();
    let push = message(&v2, Channel::Push);
    w.enqueue(&push).await;
    w.run_until_idle(Channel::Push, 30, 10).await;
    w.advance(600);
    w.run_until_idle(SMS, 60, 40).await;
    let calls = |m: &DeliveryMessage| w.provider.calls_for(&m.delivery_key);
    (calls(&push), calls(&sms))
}

#[tokio::test]
async fn a_channel_added_ahead_after_the_sole_message_keeps_the_order() {
    assert_eq!(
        edited_to_two(false).await,
        (1, 0),
        "plain: push, the head, sent"
    );
    assert_eq!(edited_to_two(true).await, (1, 0), "sole: the same");
}

/// With suppressions kept, a sole message without the address's hash cannot name the
/// suppression in its one read: two reads.
#[tokio::test]
async fn a_sole_message_without_a_hash_takes_two_reads_when_suppressions_are_kept() {
    let (w, m, out) = polled(|r| message(r, SMS).sole(None)).await;
    assert!(m.sole_channel && m.address_hash.is_none());
    assert_eq!(path(&out, SMS), (0, 0));
    assert_eq!(out.metrics.get(SMS).delivered, 1);
    assert_eq!(w.provider.calls_for(&m.delivery_key), 1);
}

/// A throttled partition: no claim before the gate; the two-read path holds the message.
#[tokio::test]
async fn a_closed_gate_holds_a_sole_message_without_a_claim() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("gated", &[SMS]).await;
    let m = sole_message(&r, SMS);
    let partition = w.provider.partition(SMS);
    let until = T0.plus(Duration::from_secs(120));
    w.gate.throttle(&partition, until).await.unwrap();
    w.enqueue(&m).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(
        path(&out, SMS),
        (0, 0),
        "no one-read claim at a closed gate"
    );
    assert_eq!(out.metrics.get(SMS).deferred_gate, 1);
    assert!(
        matches!(actions(&out)[..], [Action::Hold { .. }]),
        "{:?}",
        out.records
    );
    assert_eq!(w.provider.total_calls(), 0);
    let rec = w.record(&m.delivery_key).await;
    assert!(rec.is_none(), "no ledger item at a closed gate: {rec:?}");
    // Open again: the one-read path takes it.
    w.advance(121);
    let out = w.run(SMS).await.unwrap();
    assert_eq!(path(&out, SMS), (1, 0));
    assert_eq!(w.provider.calls_for(&m.delivery_key), 1);
}

/// A wait, a fallback or a redrive is the two-read path's: no one-read claim.
#[tokio::test]
async fn a_wait_a_fallback_or_a_redrive_takes_two_reads() {
    let later = T0.plus(Duration::from_secs(30));
    let (w, m, out) = polled(|r| DeliveryMessage {
        not_before: Some(later),
        ..sole_message(r, SMS)
    })
    .await;
    assert_eq!(path(&out, SMS), (0, 0), "not_before");
    assert!(matches!(
        actions(&out)[..],
        [Action::Hold { .. } | Action::Reenqueued]
    ));
    assert_eq!(w.provider.calls_for(&m.delivery_key), 0);

    let (w, m, out) = polled(|r| DeliveryMessage {
        fallback_from: Some(Channel::Push),
        ..sole_message(r, SMS)
    })
    .await;
    assert_eq!(path(&out, SMS), (0, 0), "fallback_from");
    assert_eq!(w.provider.calls_for(&m.delivery_key), 1);

    let marker = RedriveMarker {
        batch_id: "batch-1".into(),
        operator: "ops".into(),
        at: T0,
    };
    let (w, m, out) = polled(|r| DeliveryMessage {
        redrive: Some(marker),
        ..sole_message(r, SMS)
    })
    .await;
    assert_eq!(path(&out, SMS), (0, 0), "redrive");
    assert_eq!(w.provider.calls_for(&m.delivery_key), 1);
}

/// A suppressed address, read in the one read: dead `suppressed`, never sent.
#[tokio::test]
async fn a_suppressed_address_dies_on_the_one_read_path() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("suppressed", &[SMS]).await;
    let to = &r.recipients[&SMS];
    let sup = Suppression::record(&suppression_key(), to, SuppressionSource::Operator, T0);
    w.store.put_suppression(&sup).await.unwrap();
    let m = sole_message(&r, SMS);
    w.enqueue(&m).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(path(&out, SMS), (1, 0));
    assert_eq!(w.provider.total_calls(), 0);
    let rec = w.record(&m.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Dead);
    assert_eq!(rec.dead_reason(), Some(DeadReason::Suppressed));
    assert_eq!(rec.attempt_count(), 0);
}
