//! The two ways a chain goes on that the worlds where heads die out of budget called for (chaos
//! seed 35): a redriven delivery enqueues again the reminder's channels that have no ledger item
//! (`rewake`), and a fallback's message that finds its channel already dead, having sent nothing
//! and named nothing, hands the chain on past it (`pass_on`); one that may have sent does not.

use std::collections::BTreeSet;

use reminders::clock::Clock;
use reminders::delivery::{transition, Written};
use reminders::domain::{Channel, DeadReason, DeliveryMessage, RedriveMarker, Reminder};
use reminders::ledger::{Change, RedriveAudit, Status};
use reminders::ports::ReminderStore;
use serde_json::json;

use crate::chains::{ctx, drain, head_dies_out_of_budget, prefs};
use crate::harness::{message, test_config, Mem};

/// `channel`'s delivery of `r` dies `country_not_allowed` (before any claim, nothing sent);
/// `maybe_sent` says an earlier attempt's answer was lost.
async fn dies_abroad(w: &Mem, r: &Reminder, channel: Channel, maybe_sent: bool) {
    let die = Change::Die {
        token: None,
        reason: DeadReason::CountryNotAllowed,
        spends_attempt: false,
        error: None,
        fallback_to: None,
        maybe_sent,
    };
    let c = ctx(r, channel, w.clock.now());
    let died = transition(&*w.ledger, None, die, &c).await.unwrap();
    assert!(matches!(died, Written::Applied(_)), "{died:?}");
}

/// `channel`'s delivery of `r` is cancelled: an item, settled.
async fn cancelled(w: &Mem, r: &Reminder, channel: Channel) {
    let c = ctx(r, channel, w.clock.now());
    let done = transition(&*w.ledger, None, Change::Cancel, &c)
        .await
        .unwrap();
    assert!(matches!(done, Written::Applied(_)), "{done:?}");
}

/// The operator redrives push's dead letter: its ledger item made ready again, and the copy
/// sent back with the redrive's marker, as `core/src/redrive` sends it.
async fn redrive_push(w: &Mem, r: &Reminder) {
    let redrive = Change::Redrive {
        audit: RedriveAudit {
            batch_id: "b1".into(),
            operator: "op".into(),
            note: String::new(),
        },
        reasons: BTreeSet::from([DeadReason::AttemptsExhausted]),
    };
    let c = ctx(r, Channel::Push, w.clock.now());
    let done = transition(&*w.ledger, None, redrive, &c).await.unwrap();
    assert!(matches!(done, Written::Applied(_)), "{done:?}");
    let mut msg = message(r, Channel::Push);
    msg.redrive = Some(RedriveMarker {
        batch_id: "b1".into(),
        operator: "op".into(),
        at: w.clock.now(),
    });
    w.enqueue(&msg).await;
}

/// The messages waiting on `channel`'s queue.
fn waiting(w: &Mem, channel: Channel) -> Vec<DeliveryMessage> {
    w.queue
        .peek_all(channel)
        .iter()
        .map(|b| DeliveryMessage::decode(b).unwrap())
        .collect()
}

/// A reminder on push, email and SMS; the order `[push, email]`; push claimed as the head,
/// then dead out of budget, email's own message acknowledged as not needed (no item).
async fn push_head_spent(w: &Mem, id: &str) -> Reminder {
    let r = w
        .reminder(id, &[Channel::Push, Channel::Email, Channel::Sms])
        .await;
    let order = prefs(json!({"fallback": ["push", "email"]}));
    w.store
        .put_preferences(&r.subscriber_id, &order)
        .await
        .unwrap();
    head_dies_out_of_budget(w, &r, &[Channel::Push, Channel::Email]).await;
    assert!(w
        .record(&message(&r, Channel::Email).delivery_key)
        .await
        .is_none());
    r
}

/// Seed 35: a redriven push enqueues email's message again (email has no item: its own
/// message was acknowledged as not needed), and not SMS's, which has one.
#[tokio::test]
async fn a_redriven_delivery_enqueues_again_only_the_channels_with_no_item() {
    let w = Mem::new(test_config(), true);
    let r = push_head_spent(&w, "rw1").await;
    cancelled(&w, &r, Channel::Sms).await;
    w.advance(300);
    redrive_push(&w, &r).await;
    w.run(Channel::Push).await.unwrap();
    let email = waiting(&w, Channel::Email);
    assert_eq!(email.len(), 1, "{email:?}");
    assert_eq!(
        email[0].delivery_key,
        message(&r, Channel::Email).delivery_key
    );
    assert_eq!(
        email[0].fallback_from, None,
        "its own message, not a fallback"
    );
    assert_eq!(email[0].payload_version, r.payload_version);
    assert!(waiting(&w, Channel::Sms).is_empty(), "SMS has an item");
    // Its standby step decides afresh: push, redriven, was delivered, so email is not needed.
    drain(&w, Channel::Email).await;
    let email = message(&r, Channel::Email);
    assert_eq!(w.provider.calls_for(&email.delivery_key), 0);
}

/// Every other channel has an item: a redriven delivery enqueues nothing again.
#[tokio::test]
async fn a_redriven_delivery_enqueues_nothing_when_every_channel_has_an_item() {
    let w = Mem::new(test_config(), true);
    let r = push_head_spent(&w, "rw2").await;
    cancelled(&w, &r, Channel::Email).await;
    cancelled(&w, &r, Channel::Sms).await;
    w.advance(300);
    redrive_push(&w, &r).await;
    w.run(Channel::Push).await.unwrap();
    assert!(waiting(&w, Channel::Email).is_empty());
    assert!(waiting(&w, Channel::Sms).is_empty());
    let push = w.record(&message(&r, Channel::Push).delivery_key).await;
    assert_eq!(push.unwrap().status(), Status::Delivered);
}

/// A chain of three, `[push, sms, email]`: SMS's fallback message (from push) finds SMS
/// already dead `country_not_allowed` (a number an edit moved abroad), naming nothing.
async fn sms_dead_before_its_turn(w: &Mem, id: &str, maybe_sent: bool) -> Reminder {
    let channels = [Channel::Push, Channel::Sms, Channel::Email];
    let r = w.reminder(id, &channels).await;
    let order = prefs(json!({"fallback": ["push", "sms", "email"]}));
    w.store
        .put_preferences(&r.subscriber_id, &order)
        .await
        .unwrap();
    head_dies_out_of_budget(w, &r, &channels).await;
    dies_abroad(w, &r, Channel::Sms, maybe_sent).await;
    let mut fallback = message(&r, Channel::Sms);
    fallback.fallback_from = Some(Channel::Push);
    w.enqueue(&fallback).await;
    drain(w, Channel::Sms).await;
    r
}

/// The chain goes on past the dead channel: its death now names email, whose message is
/// enqueued and sent (before, email, acknowledged as not needed, was never sent).
#[tokio::test]
async fn a_fallback_finding_its_channel_dead_having_sent_nothing_hands_on_past_it() {
    let w = Mem::new(test_config(), true);
    let r = sms_dead_before_its_turn(&w, "po1", false).await;
    let sms = w.record(&message(&r, Channel::Sms).delivery_key).await;
    let sms = sms.unwrap();
    assert_eq!(sms.dead_reason(), Some(DeadReason::CountryNotAllowed));
    assert_eq!(sms.fallback_to(), Some(Channel::Email), "handed on past it");
    assert_eq!(
        w.provider
            .calls_for(&message(&r, Channel::Sms).delivery_key),
        0
    );
    let email = waiting(&w, Channel::Email);
    assert_eq!(email.len(), 1, "{email:?}");
    assert_eq!(email[0].fallback_from, Some(Channel::Sms));
    drain(&w, Channel::Email).await;
    let email = message(&r, Channel::Email);
    assert_eq!(w.provider.calls_for(&email.delivery_key), 1, "sent once");
    let rec = w.record(&email.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Delivered);
    assert_eq!(rec.fallback_from(), Some(Channel::Sms));
}

/// The same, but an earlier SMS attempt may have reached the person (its answer was lost):
/// the chain ends there, and email is never sent.
#[tokio::test]
async fn a_fallback_finding_its_channel_dead_after_an_ambiguous_attempt_hands_nothing_on() {
    let w = Mem::new(test_config(), true);
    let r = sms_dead_before_its_turn(&w, "po2", true).await;
    let sms = w.record(&message(&r, Channel::Sms).delivery_key).await;
    assert_eq!(
        sms.unwrap().fallback_to(),
        None,
        "may have sent: no hand-on"
    );
    assert!(waiting(&w, Channel::Email).is_empty());
    drain(&w, Channel::Email).await;
    let email = message(&r, Channel::Email);
    assert_eq!(w.provider.calls_for(&email.delivery_key), 0);
    assert!(w.record(&email.delivery_key).await.is_none());
}
