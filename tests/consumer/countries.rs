//! The SMS allow-list in the consumer: a number outside `SMS_ALLOWED_COUNTRY_CODES` dies
//! `country_not_allowed` before any claim or send, with its DLQ copy, no attempt spent, and the
//! number in no error; the reminder's other channels go out, and a fallback order hands the
//! reminder on. A standby SMS whose turn never comes never dies for it. With the list widened,
//! the same number is sent.

use reminders::consumer::{Action, ConsumerConfig};
use reminders::domain::{Channel, DeadReason, Recipient, SmsCountries};
use reminders::ledger::Status;
use reminders::ports::ReminderStore;
use serde_json::json;

use crate::harness::{message, reminder, test_config, Mem};

const ABROAD: &str = "+447700900123";

async fn abroad(w: &Mem, id: &str) -> reminders::domain::Reminder {
    let mut r = reminder(id, &[Channel::Sms, Channel::Email]);
    r.recipients.insert(
        Channel::Sms,
        Recipient::parse(Channel::Sms, ABROAD).unwrap(),
    );
    w.store.insert(&r).await.unwrap();
    r
}

#[tokio::test]
async fn a_number_outside_the_allowed_codes_dies_unsent_with_its_copy() {
    let w = Mem::new(test_config(), true);
    let r = abroad(&w, "c1").await;
    let (sms, email) = (message(&r, Channel::Sms), message(&r, Channel::Email));
    w.enqueue(&sms).await;
    w.enqueue(&email).await;
    let out = w.run(Channel::Sms).await.unwrap();
    assert_eq!(out.records[0].action, Action::Ack);
    assert_eq!(w.provider.calls_for(&sms.delivery_key), 0, "never sent");
    let rec = w.record(&sms.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Dead);
    assert_eq!(rec.dead_reason(), Some(DeadReason::CountryNotAllowed));
    assert_eq!(rec.attempt_count(), 0, "no attempt spent");
    let error = rec.last_error().unwrap_or_default().to_owned();
    assert!(error.contains("SMS_ALLOWED_COUNTRY_CODES"), "{error}");
    assert!(
        !error.contains("7700900123"),
        "the number is never written: {error}"
    );
    let copies = w.dead_letters(Channel::Sms).await;
    assert_eq!(copies.len(), 1, "the operator's to see and redrive");
    assert_eq!(copies[0].1.reason, DeadReason::CountryNotAllowed);
    // The email goes out on its own: no fallback, no block.
    w.run(Channel::Email).await.unwrap();
    assert_eq!(w.provider.calls_for(&email.delivery_key), 1);
    assert_eq!(
        w.record(&email.delivery_key).await.unwrap().status(),
        Status::Delivered
    );
}

#[tokio::test]
async fn a_widened_list_sends_the_same_number() {
    for countries in [SmsCountries::Any, SmsCountries::parse("1,44").unwrap()] {
        let cfg = ConsumerConfig {
            sms_countries: countries.clone(),
            ..test_config()
        };
        let w = Mem::new(cfg, true);
        let r = abroad(&w, "c2").await;
        let sms = message(&r, Channel::Sms);
        w.enqueue(&sms).await;
        w.run(Channel::Sms).await.unwrap();
        assert_eq!(w.provider.calls_for(&sms.delivery_key), 1, "{countries:?}");
        assert_eq!(
            w.record(&sms.delivery_key).await.unwrap().status(),
            Status::Delivered
        );
    }
}

/// A window where the allow-list meets an edit and the ledger's TTL (found by the chaos
/// worlds, seed 96): the message was enqueued under the first version, an edit then moved the
/// number abroad and the freshness days later. The death's TTL follows the reminder as read,
/// not the message, or the item (and the proof that nothing was sent) would expire before its
/// copy is made.
#[tokio::test]
async fn a_death_after_an_edit_keeps_the_edited_reminders_horizon() {
    let cfg = test_config();
    let retention = cfg.retention;
    let w = Mem::new(cfg, true);
    let first = reminder("c3", &[Channel::Sms]);
    let msg = message(&first, Channel::Sms);
    let mut edited = first.clone();
    edited.recipients.insert(
        Channel::Sms,
        Recipient::parse(Channel::Sms, ABROAD).unwrap(),
    );
    edited.fresh_until = first
        .fresh_until
        .plus(std::time::Duration::from_secs(3 * 86_400));
    w.store.insert(&edited).await.unwrap();
    w.enqueue(&msg).await;
    w.run(Channel::Sms).await.unwrap();
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::CountryNotAllowed));
    assert_eq!(
        rec.expires_at(),
        retention.expires_at(edited.fresh_until),
        "the edited reminder's horizon, not the message's"
    );
    assert_eq!(w.dead_letters(Channel::Sms).await.len(), 1);
}

/// A reminder whose SMS number is abroad, under this fallback order, both channels queued:
/// its SMS and email messages.
async fn ordered(
    w: &Mem,
    id: &str,
    order: [&str; 2],
) -> (
    reminders::domain::DeliveryMessage,
    reminders::domain::DeliveryMessage,
) {
    let r = abroad(w, id).await;
    let prefs = serde_json::from_value(json!({ "fallback": order })).unwrap();
    w.store
        .put_preferences(&r.subscriber_id, &prefs)
        .await
        .unwrap();
    let (sms, email) = (message(&r, Channel::Sms), message(&r, Channel::Email));
    w.enqueue(&sms).await;
    w.enqueue(&email).await;
    (sms, email)
}

/// SMS first in the order, its number abroad: it dies unsent, and email takes over.
#[tokio::test]
async fn a_number_abroad_hands_the_reminder_to_the_fallback_channel() {
    let w = Mem::new(test_config(), true);
    let (sms, email) = ordered(&w, "c4", ["sms", "email"]).await;
    w.run(Channel::Sms).await.unwrap();
    let dead = w.record(&sms.delivery_key).await.unwrap();
    assert_eq!(dead.dead_reason(), Some(DeadReason::CountryNotAllowed));
    w.run_until_idle(Channel::Email, 60, 10).await;
    assert_eq!(
        w.provider.calls_for(&email.delivery_key),
        1,
        "email sent once"
    );
    let sent = w.record(&email.delivery_key).await.unwrap();
    assert_eq!(sent.status(), Status::Delivered);
    assert_eq!(sent.fallback_from(), Some(Channel::Sms));
    assert_eq!(w.provider.calls_for(&sms.delivery_key), 0);
    let dead = w.record(&sms.delivery_key).await.unwrap();
    assert_eq!(dead.fallback_to(), Some(Channel::Email), "handed on");
}

/// SMS in standby behind email, which delivers: the SMS's turn never comes, so it never dies
/// (no death, no DLQ copy, no page) although its number is abroad.
#[tokio::test]
async fn a_standby_sms_behind_a_delivered_channel_never_dies() {
    let w = Mem::new(test_config(), true);
    let (sms, email) = ordered(&w, "c5", ["email", "sms"]).await;
    let out = w.run(Channel::Sms).await.unwrap();
    assert!(
        matches!(out.records[0].action, Action::Hold { .. }),
        "standby behind email: {:?}",
        out.records
    );
    w.run(Channel::Email).await.unwrap();
    assert_eq!(
        w.record(&email.delivery_key).await.unwrap().status(),
        Status::Delivered
    );
    w.run_until_idle(Channel::Sms, 60, 10).await;
    assert_eq!(
        w.record(&sms.delivery_key).await,
        None,
        "never claimed, never dead"
    );
    assert!(w.dead_letters(Channel::Sms).await.is_empty());
    assert_eq!(w.provider.calls_for(&sms.delivery_key), 0);
}
