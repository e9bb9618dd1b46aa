//! The recipient's rules in the consumer (docs/design.md, "Recipient rules"), on in-memory ports
//! with a manual clock: an opted-out channel is never sent, a delivery inside quiet hours waits for
//! their end with nothing spent, and one stale by then ends `expired_quiet_hours`. None of them
//! calls the provider, spends an attempt or makes a DLQ copy.

use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::consumer::Action;
use reminders::domain::{Channel, DeadReason, Preferences, Reminder};
use reminders::ledger::Status;
use reminders::ports::ReminderStore;
use serde_json::json;

use crate::harness::{message, reminder, test_config, Mem};

/// 2027-01-16T04:30Z: 23:30 on the 15th in New York (UTC−5 in January).
const LOCAL_2330: Timestamp = Timestamp::from_millis(1_800_073_800_000);
/// 07:00 in New York on the 16th: 12:00Z.
const LOCAL_0700: Timestamp = Timestamp::from_millis(1_800_100_800_000);

fn prefs(v: serde_json::Value) -> Preferences {
    serde_json::from_value(v).unwrap()
}

/// A reminder due at `due`, fresh for `fresh`, stored.
async fn due_at(
    w: &Mem,
    id: &str,
    channels: &[Channel],
    due: Timestamp,
    fresh: Duration,
) -> Reminder {
    let mut r = reminder(id, channels);
    r.due_at = due;
    r.fresh_until = due.plus(fresh);
    w.store.insert(&r).await.unwrap();
    r
}

#[tokio::test]
async fn an_opt_out_set_after_the_enqueue_wins_and_the_other_channel_is_sent() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[Channel::Sms, Channel::Email]).await;
    let (sms, email) = (message(&r, Channel::Sms), message(&r, Channel::Email));
    w.enqueue(&sms).await;
    w.enqueue(&email).await;
    // Enqueued first, opted out before the claim.
    let sub = r.subscriber_id.clone();
    w.store
        .put_preferences(&sub, &prefs(json!({"opted_out": ["sms"]})))
        .await
        .unwrap();
    let out = w.run(Channel::Sms).await.unwrap();
    assert_eq!(out.records[0].action, Action::Ack);
    assert_eq!(w.provider.calls_for(&sms.delivery_key), 0, "never sent");
    let rec = w.record(&sms.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Dead);
    assert_eq!(rec.dead_reason(), Some(DeadReason::OptedOut));
    assert_eq!(rec.attempt_count(), 0, "no attempt spent");
    assert!(
        w.dead_letters(Channel::Sms).await.is_empty(),
        "a choice, not a failure: no DLQ copy"
    );
    let m = out.metrics.get(Channel::Sms);
    assert_eq!(m.dead_total(), 1);
    assert_eq!(
        m.dead_needing_operator(),
        0,
        "the dead-deliveries alarm stays quiet"
    );
    w.run(Channel::Email).await.unwrap();
    assert_eq!(w.provider.calls_for(&email.delivery_key), 1);
}

/// Quiet hours at night: due at 23:30 local inside 22:00–07:00 with 12 h of freshness goes
/// out at 07:00 local, nothing spent while it waited.
#[tokio::test]
async fn inside_quiet_hours_it_waits_until_they_end_and_is_sent_then() {
    let w = Mem::new(test_config(), true);
    w.clock.set(LOCAL_2330);
    let r = due_at(
        &w,
        "r2",
        &[Channel::Push],
        LOCAL_2330,
        Duration::from_secs(12 * 3600),
    )
    .await;
    let quiet = json!({"quiet_hours": {"push": {"start": "22:00", "end": "07:00", "zone": "America/New_York"}}});
    w.store
        .put_preferences(&r.subscriber_id, &prefs(quiet))
        .await
        .unwrap();
    let msg = message(&r, Channel::Push);
    w.enqueue(&msg).await;
    let out = w.run(Channel::Push).await.unwrap();
    assert!(
        matches!(
            out.records[0].action,
            Action::Hold { .. } | Action::Reenqueued
        ),
        "{:?}",
        out.records
    );
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 0);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Deferred);
    // Until every clock within the margin is past 07:00 (docs/design.md, "Clock margin").
    let margin = reminders::domain::reminder::CLOCK_MARGIN;
    assert_eq!(rec.next_eligible_at(), Some(LOCAL_0700.plus(margin)));
    assert_eq!(rec.attempt_count(), 0);
    assert!(
        rec.last_error().unwrap().contains("quiet hours"),
        "{:?}",
        rec.last_error()
    );
    // Nothing goes out a minute before 07:00.
    w.clock.set(LOCAL_0700.minus(Duration::from_secs(60)));
    while w.run(Channel::Push).await.is_some() {}
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 0, "still quiet");
    w.clock.set(LOCAL_0700.plus(margin));
    w.run_until_idle(Channel::Push, 1, 20).await;
    assert_eq!(
        w.provider.calls_for(&msg.delivery_key),
        1,
        "sent once, at 07:00 local"
    );
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!((rec.status(), rec.attempt_count()), (Status::Delivered, 1));
}

/// The same with one hour of freshness: stale before 07:00, so it ends
/// `expired_quiet_hours` at once, never sent.
#[tokio::test]
async fn quiet_hours_that_outlast_freshness_end_it_as_expired_quiet_hours() {
    let w = Mem::new(test_config(), true);
    w.clock.set(LOCAL_2330);
    let r = due_at(
        &w,
        "r3",
        &[Channel::Push],
        LOCAL_2330,
        Duration::from_secs(3600),
    )
    .await;
    let quiet = json!({"quiet_hours": {"push": {"start": "22:00", "end": "07:00", "zone": "America/New_York"}}});
    w.store
        .put_preferences(&r.subscriber_id, &prefs(quiet))
        .await
        .unwrap();
    let msg = message(&r, Channel::Push);
    w.enqueue(&msg).await;
    let out = w.run(Channel::Push).await.unwrap();
    assert_eq!(out.records[0].action, Action::Ack);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::ExpiredQuietHours));
    assert_eq!((rec.status(), rec.attempt_count()), (Status::Dead, 0));
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 0);
    assert!(w.dead_letters(Channel::Push).await.is_empty());
    assert_eq!(out.metrics.get(Channel::Push).dead_total(), 1);
}

/// Outside its quiet hours, and on a channel without any, a delivery goes out as before.
#[tokio::test]
async fn outside_quiet_hours_it_is_sent_at_once() {
    let w = Mem::new(test_config(), true);
    w.clock.set(LOCAL_0700.plus(Duration::from_secs(3600)));
    let due = LOCAL_0700.plus(Duration::from_secs(3600));
    let r = due_at(&w, "r4", &[Channel::Push], due, Duration::from_secs(3600)).await;
    let quiet = json!({"quiet_hours": {"push": {"start": "22:00", "end": "07:00", "zone": "America/New_York"}}, "opted_out": ["email"]});
    w.store
        .put_preferences(&r.subscriber_id, &prefs(quiet))
        .await
        .unwrap();
    let msg = message(&r, Channel::Push);
    w.enqueue(&msg).await;
    w.run(Channel::Push).await.unwrap();
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 1);
}

/// A provider's `410 Gone` suppresses the address (a keyed hash beside the masked form, never
/// the address); the next reminder to it ends `suppressed` with no call, no attempt and no
/// DLQ copy; once an operator lifts the suppression, a later one is sent.
#[tokio::test]
async fn an_address_declared_gone_is_suppressed_and_not_sent_again_until_lifted() {
    use reminders::domain::{AddressHash, SuppressionSource};
    use reminders_harness::scripted::Answer;
    let w = Mem::new(test_config(), true);
    let first = w.reminder("gone-1", &[Channel::Push]).await;
    let m1 = message(&first, Channel::Push);
    w.provider.script_for(&m1.delivery_key, [Answer::Gone]);
    w.enqueue(&m1).await;
    let out = w.run(Channel::Push).await.unwrap();
    assert_eq!(out.metrics.get(Channel::Push).suppressions_recorded, 1);
    let rec = w.record(&m1.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::Rejected), "its own end");
    let recipient = &first.recipients[&Channel::Push];
    let hash = AddressHash::of(&crate::harness::suppression_key(), recipient);
    let sup = w
        .store
        .suppression(&hash)
        .await
        .unwrap()
        .expect("suppressed");
    assert_eq!(sup.source, SuppressionSource::Http410);
    assert_eq!(sup.channel, Channel::Push);
    let shown = serde_json::to_string(&sup).unwrap();
    assert!(!shown.contains(recipient.expose()), "{shown}");

    let second = w.reminder("gone-2", &[Channel::Push]).await;
    let m2 = message(&second, Channel::Push);
    w.enqueue(&m2).await;
    let out = w.run(Channel::Push).await.unwrap();
    assert_eq!(out.records[0].action, Action::Ack);
    assert_eq!(w.provider.calls_for(&m2.delivery_key), 0, "never called");
    let rec = w.record(&m2.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Dead);
    assert_eq!(rec.dead_reason(), Some(DeadReason::Suppressed));
    assert_eq!(rec.attempt_count(), 0);
    let why = rec.last_error().unwrap();
    assert!(
        why.contains("http_410") && why.contains(sup.address_hash.as_str()),
        "{why}"
    );
    assert!(!why.contains(recipient.expose()), "{why}");
    assert_eq!(out.metrics.get(Channel::Push).dead_needing_operator(), 0);
    // Only the first (rejected) death was copied to the DLQ.
    assert_eq!(w.dead_letters(Channel::Push).await.len(), 1);

    assert!(w.store.lift_suppression(&hash));
    let third = w.reminder("gone-3", &[Channel::Push]).await;
    let m3 = message(&third, Channel::Push);
    w.enqueue(&m3).await;
    w.run(Channel::Push).await.unwrap();
    assert_eq!(
        w.provider.calls_for(&m3.delivery_key),
        1,
        "sent once lifted"
    );
    assert_eq!(
        w.record(&m3.delivery_key).await.unwrap().status(),
        Status::Delivered
    );
}

/// An opt-out is the recipient's word and comes first: a channel both opted out of and
/// suppressed ends `opted_out`.
#[tokio::test]
async fn an_opt_out_wins_over_a_suppression() {
    use reminders::domain::{AddressHash, Suppression, SuppressionSource};
    let w = Mem::new(test_config(), true);
    let r = w.reminder("both", &[Channel::Sms]).await;
    let recipient = &r.recipients[&Channel::Sms];
    let key = crate::harness::suppression_key();
    let sup = Suppression::record(
        &key,
        recipient,
        SuppressionSource::SnsInvalidNumber,
        reminders::clock::Clock::now(&w.clock),
    );
    w.store.put_suppression(&sup).await.unwrap();
    assert!(w
        .store
        .suppression(&AddressHash::of(&key, recipient))
        .await
        .unwrap()
        .is_some());
    w.store
        .put_preferences(&r.subscriber_id, &prefs(json!({"opted_out": ["sms"]})))
        .await
        .unwrap();
    let msg = message(&r, Channel::Sms);
    w.enqueue(&msg).await;
    w.run(Channel::Sms).await.unwrap();
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::OptedOut));
}

/// Fallback (docs/design.md, "Fallback chain"): with the order push, then email, a reminder listing
/// both sends push only; email waits in standby (its own message held while push has not settled,
/// nothing claimed). The push delivery dies opted out: email gets a delivery of its own, keyed by
/// its own channel, sent once; the chain is on both ledger items.
#[tokio::test]
async fn an_opted_out_channel_falls_back_to_the_next_one_in_the_order_once() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("fb1", &[Channel::Push, Channel::Email]).await;
    let order = json!({"opted_out": ["push"], "fallback": ["push", "email"]});
    w.store
        .put_preferences(&r.subscriber_id, &prefs(order))
        .await
        .unwrap();
    let (push, email) = (message(&r, Channel::Push), message(&r, Channel::Email));
    w.enqueue(&push).await;
    w.enqueue(&email).await;
    // Email first: standby, held while push has not settled.
    let out = w.run(Channel::Email).await.unwrap();
    assert!(
        matches!(out.records[0].action, Action::Hold { .. }),
        "{out:?}"
    );
    assert_eq!(out.metrics.get(Channel::Email).standby_held, 1);
    assert_eq!(w.provider.calls_for(&email.delivery_key), 0);
    assert!(w.record(&email.delivery_key).await.is_none(), "no claim");
    // Push: opted out, falls back.
    let out = w.run(Channel::Push).await.unwrap();
    assert_eq!(out.metrics.get(Channel::Push).fallbacks, 1);
    let dead = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(dead.dead_reason(), Some(DeadReason::OptedOut));
    assert_eq!(dead.fallback_to(), Some(Channel::Email));
    assert_eq!(w.provider.calls_for(&push.delivery_key), 0);
    // The fallback's message: email's own key, sent once; the held original, back later,
    // finds it sent.
    w.run(Channel::Email).await.unwrap();
    assert_eq!(w.provider.calls_for(&email.delivery_key), 1);
    let sent = w.record(&email.delivery_key).await.unwrap();
    assert_eq!(sent.status(), Status::Delivered);
    assert_eq!(sent.fallback_from(), Some(Channel::Push));
    w.advance(61);
    let back = w
        .run(Channel::Email)
        .await
        .expect("the held original comes back");
    assert_eq!(
        back.records[0].action,
        Action::Ack,
        "a duplicate of a delivered key"
    );
    assert_eq!(w.provider.calls_for(&email.delivery_key), 1, "once");
    assert!(w.run(Channel::Push).await.is_none());
}

/// Quiet hours that outlast freshness hand the reminder to the fallback channel; a provider's
/// rejection does too. A delivered first channel leaves its standby unsent.
#[tokio::test]
async fn quiet_hours_and_rejections_fall_back_and_a_delivery_keeps_standby_unsent() {
    use reminders_harness::scripted::Answer;
    // Quiet until stale on push → email.
    let w = Mem::new(test_config(), true);
    w.clock.set(LOCAL_2330);
    let r = due_at(
        &w,
        "fb2",
        &[Channel::Push, Channel::Email],
        LOCAL_2330,
        Duration::from_secs(3600),
    )
    .await;
    let p = json!({"quiet_hours": {"push": {"start": "22:00", "end": "07:00", "zone": "America/New_York"}},
        "fallback": ["push", "email"]});
    w.store
        .put_preferences(&r.subscriber_id, &prefs(p))
        .await
        .unwrap();
    let (push, email) = (message(&r, Channel::Push), message(&r, Channel::Email));
    w.enqueue(&push).await;
    w.run(Channel::Push).await.unwrap();
    let rec = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::ExpiredQuietHours));
    assert_eq!(rec.fallback_to(), Some(Channel::Email));
    w.run(Channel::Email).await.unwrap();
    assert_eq!(w.provider.calls_for(&email.delivery_key), 1);

    // Rejected on push → email; delivered on push → email's turn never comes.
    let w = Mem::new(test_config(), true);
    let rejected = w.reminder("fb3", &[Channel::Push, Channel::Email]).await;
    let fine = w.reminder("fb4", &[Channel::Push, Channel::Email]).await;
    let order = json!({"fallback": ["push", "email"]});
    w.store
        .put_preferences(&rejected.subscriber_id, &prefs(order))
        .await
        .unwrap();
    let bad = message(&rejected, Channel::Push);
    w.provider
        .script_for(&bad.delivery_key, [Answer::Permanent]);
    for r in [&rejected, &fine] {
        w.enqueue(&message(r, Channel::Push)).await;
        w.enqueue(&message(r, Channel::Email)).await;
    }
    w.run(Channel::Push).await.unwrap();
    let rec = w.record(&bad.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::Rejected));
    assert_eq!(rec.fallback_to(), Some(Channel::Email));
    assert_eq!(
        w.dead_letters(Channel::Push).await.len(),
        1,
        "rejected: its DLQ copy"
    );
    w.run_until_idle(Channel::Email, 60, 10).await;
    let fb = message(&rejected, Channel::Email).delivery_key;
    assert_eq!(w.provider.calls_for(&fb), 1);
    let standby = message(&fine, Channel::Email).delivery_key;
    assert_eq!(
        w.provider.calls_for(&standby),
        0,
        "reached on push: no email"
    );
    assert!(w.record(&standby).await.is_none());
    let delivered = w
        .record(&message(&fine, Channel::Push).delivery_key)
        .await
        .unwrap();
    assert_eq!(delivered.fallback_to(), None);
}

/// The fallback's message is lost (a crash after the death, or SQS refusing it): the standby
/// channel's own message finds the death on the ledger and sends it, once. And with a
/// provider that does not honour idempotency keys, a failed ledger write before any send gives
/// the lease back: the retry decides the same death, never `ambiguous`.
#[tokio::test]
async fn a_lost_fallback_message_or_a_failed_write_before_the_send_loses_nothing() {
    use reminders::ports::faults::FaultPoint;
    use reminders::ports::ledger::OP_PUT;
    use reminders::ports::queue::OP_SEND;
    let w = Mem::new(test_config(), false);
    let r = w.reminder("fb5", &[Channel::Sms, Channel::Email]).await;
    let order = json!({"opted_out": ["sms"], "fallback": ["sms", "email"]});
    w.store
        .put_preferences(&r.subscriber_id, &prefs(order))
        .await
        .unwrap();
    let (sms, email) = (message(&r, Channel::Sms), message(&r, Channel::Email));
    w.enqueue(&sms).await;
    w.enqueue(&email).await;
    let out = w.run(Channel::Email).await.unwrap();
    assert!(
        matches!(out.records[0].action, Action::Hold { .. }),
        "standby"
    );
    // Put #1 is the claim; put #2, the death, fails: the lease is given back.
    w.ledger_faults.fail_after(OP_PUT, FaultPoint::Before, 1, 1);
    let out = w.run(Channel::Sms).await.unwrap();
    assert_eq!(out.records[0].action, Action::Retry);
    let released = w.record(&sms.delivery_key).await.unwrap();
    assert_eq!(
        released.status(),
        Status::Ready,
        "given back, nothing spent"
    );
    assert_eq!(released.attempt_count(), 0);
    // The retry: the same death; its fallback message is refused by SQS.
    w.queue_faults.fail(OP_SEND, FaultPoint::Before, 1);
    w.advance(181);
    w.run(Channel::Sms).await.unwrap();
    let rec = w.record(&sms.delivery_key).await.unwrap();
    assert_eq!(
        rec.dead_reason(),
        Some(DeadReason::OptedOut),
        "not ambiguous"
    );
    assert_eq!(rec.attempt_count(), 0);
    assert_eq!(rec.fallback_to(), Some(Channel::Email));
    use reminders::ports::DeliveryQueue;
    let depth = w.queue.depth(Channel::Email).await.unwrap();
    assert_eq!(
        depth.total(),
        1,
        "only email's own held message: the fallback's was lost"
    );
    // Email's own held message comes back, finds the death, and sends it once.
    w.run_until_idle(Channel::Email, 60, 10).await;
    assert_eq!(w.provider.calls_for(&email.delivery_key), 1, "sent once");
    let sent = w.record(&email.delivery_key).await.unwrap();
    assert_eq!(sent.fallback_from(), Some(Channel::Sms));
    assert_eq!(
        w.provider.calls_for(&sms.delivery_key),
        0,
        "the opted-out channel never"
    );
}

/// The order changes while the first channel is still pending: nothing is lost and nothing is
/// sent twice, because a standby channel waits on the ledger, not on the order it first saw.
#[tokio::test]
async fn a_fallback_order_changed_mid_flight_loses_nothing() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("fb6", &[Channel::Push, Channel::Email]).await;
    let sub = r.subscriber_id.clone();
    w.store
        .put_preferences(&sub, &prefs(json!({"fallback": ["push", "email"]})))
        .await
        .unwrap();
    let (push, email) = (message(&r, Channel::Push), message(&r, Channel::Email));
    w.enqueue(&push).await;
    w.enqueue(&email).await;
    let out = w.run(Channel::Email).await.unwrap();
    assert!(
        matches!(out.records[0].action, Action::Hold { .. }),
        "email waits for push"
    );
    w.store
        .put_preferences(&sub, &prefs(json!({"fallback": ["email", "push"]})))
        .await
        .unwrap();
    // Push is now behind email, which has not settled: held.
    let out = w.run(Channel::Push).await.unwrap();
    assert!(
        matches!(out.records[0].action, Action::Hold { .. }),
        "push waits for email"
    );
    // Email comes back first in the order: sent. Push then finds it delivered: not needed.
    w.advance(61);
    w.run_until_idle(Channel::Email, 60, 10).await;
    w.run_until_idle(Channel::Push, 60, 10).await;
    assert_eq!(w.provider.calls_for(&email.delivery_key), 1);
    assert_eq!(w.provider.calls_for(&push.delivery_key), 0);
    assert!(w.run(Channel::Push).await.is_none());
    assert!(w.run(Channel::Email).await.is_none());
}

/// Unreadable preferences end the delivery `invalid_reminder`, naming the item, with its DLQ
/// copy: never sent past an opt-out that cannot be read, never retried into `ambiguous`.
#[tokio::test]
async fn unreadable_preferences_end_the_delivery_invalid_with_its_reason() {
    let w = Mem::new(test_config(), false);
    let r = w.reminder("bad-prefs", &[Channel::Sms]).await;
    let msg = message(&r, Channel::Sms);
    w.enqueue(&msg).await;
    // The memory store cannot hold a malformed item: a Corrupt answer stands in for one.
    w.store_faults
        .corrupt(reminders::ports::reminders::OP_PREFERENCES, 1);
    w.run(Channel::Sms).await.unwrap();
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Dead);
    assert_eq!(rec.dead_reason(), Some(DeadReason::InvalidReminder));
    assert_eq!(rec.attempt_count(), 0);
    assert!(
        rec.last_error().unwrap().contains("preferences"),
        "{:?}",
        rec.last_error()
    );
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 0);
    assert_eq!(w.dead_letters(Channel::Sms).await.len(), 1);

    // A reminder on two channels reads them before its claim (standby): the same end.
    let two = w
        .reminder("bad-prefs-2", &[Channel::Sms, Channel::Email])
        .await;
    let m2 = message(&two, Channel::Email);
    w.enqueue(&m2).await;
    w.store_faults
        .corrupt(reminders::ports::reminders::OP_PREFERENCES, 1);
    w.run(Channel::Email).await.unwrap();
    let rec = w.record(&m2.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::InvalidReminder));
    assert_eq!(w.provider.calls_for(&m2.delivery_key), 0);
}

/// Three channels in the order, the first two opted out: each death hands on to the next, the
/// last one is sent once, and every original message, held while its turn had not come, is
/// acknowledged without a second send.
#[tokio::test]
async fn a_chain_of_three_sends_the_last_channel_once() {
    let w = Mem::new(test_config(), true);
    let all = [Channel::Push, Channel::Sms, Channel::Email];
    let r = w.reminder("fb3x", &all).await;
    let p = json!({"opted_out": ["push", "sms"], "fallback": ["push", "sms", "email"]});
    w.store
        .put_preferences(&r.subscriber_id, &prefs(p))
        .await
        .unwrap();
    for c in all {
        w.enqueue(&message(&r, c)).await;
    }
    // Standbys first: held.
    for c in [Channel::Email, Channel::Sms] {
        let out = w.run(c).await.unwrap();
        assert!(matches!(out.records[0].action, Action::Hold { .. }), "{c}");
    }
    for _ in 0..6 {
        for c in all {
            while w.run(c).await.is_some() {}
        }
        w.advance(120);
    }
    let key = |c| message(&r, c).delivery_key;
    let push = w.record(&key(Channel::Push)).await.unwrap();
    let sms = w.record(&key(Channel::Sms)).await.unwrap();
    let email = w.record(&key(Channel::Email)).await.unwrap();
    assert_eq!(push.fallback_to(), Some(Channel::Sms));
    assert_eq!(sms.dead_reason(), Some(DeadReason::OptedOut));
    assert_eq!(sms.fallback_from(), Some(Channel::Push));
    assert_eq!(sms.fallback_to(), Some(Channel::Email));
    assert_eq!(email.status(), Status::Delivered);
    assert_eq!(email.fallback_from(), Some(Channel::Sms));
    for c in all {
        let expected = u32::from(c == Channel::Email);
        assert_eq!(
            w.provider.calls_for(&message(&r, c).delivery_key),
            expected,
            "{c}"
        );
    }
    use reminders::ports::DeliveryQueue;
    for c in all {
        assert_eq!(w.queue.depth(c).await.unwrap().total(), 0, "{c}: drained");
    }
}
