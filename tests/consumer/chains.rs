//! A chain after a redrive (found where heads die out of budget): the death of a redriven head
//! hands on by the chain its first claim recorded when the order as it is now names no next channel
//! (chaos seeds 131, 291), and a `country_not_allowed` death, known to have sent nothing, hands on like any such
//! death (chaos seed 241). In both, the channel behind had already been acknowledged as not
//! needed, so only the death's hand-on can send it.

use std::collections::BTreeSet;

use reminders::clock::{Clock, Timestamp};
use reminders::consumer::Action;
use reminders::delivery::{transition, Written};
use reminders::domain::{Channel, DeadReason, Preferences, Recipient, Reminder, Retention};
use reminders::ledger::{Change, Ctx, Origin, RedriveAudit, Status};
use reminders::ports::ReminderStore;
use reminders_harness::scripted::Answer;
use serde_json::json;

use crate::harness::{message, reminder, test_config, Mem};

pub(super) fn prefs(v: serde_json::Value) -> Preferences {
    serde_json::from_value(v).unwrap()
}

pub(super) fn ctx(r: &Reminder, channel: Channel, now: Timestamp) -> Ctx {
    Ctx {
        key: reminders::domain::DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel),
        now,
        expires_at: Retention::default().expires_at(r.fresh_until),
        origin: Some(Origin {
            reminder_id: r.reminder_id.clone(),
            subscriber_id: r.subscriber_id.clone(),
            channel,
            fallback_from: None,
            chain_head: false,
            chain: Vec::new(),
            unknown: Default::default(),
        }),
    }
}

/// Run `channel` until its queue is empty, 30 s between polls.
pub(super) async fn drain(w: &Mem, channel: Channel) {
    for _ in 0..200 {
        let _ = w.run(channel).await;
        if w.queue.len(channel) == 0 {
            return;
        }
        w.advance(30);
    }
    panic!("{channel} still busy");
}

/// Push, the head of `r`'s chain, is claimed by the consumer (its claim records the chain),
/// fails once, and then dies out of budget, a death that hands nothing on; each standby
/// channel's own message then finds it not needed and is acknowledged.
pub(super) async fn head_dies_out_of_budget(w: &Mem, r: &Reminder, chain: &[Channel]) {
    let push = message(r, Channel::Push);
    w.provider
        .script_for(&push.delivery_key, [Answer::Transient]);
    w.enqueue(&push).await;
    w.run(Channel::Push).await.unwrap();
    let rec = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Deferred);
    assert_eq!(rec.origin().unwrap().chain, chain, "recorded at the claim");
    let die = Change::Die {
        token: None,
        reason: DeadReason::AttemptsExhausted,
        spends_attempt: false,
        error: None,
        fallback_to: None,
        maybe_sent: false,
    };
    let c = ctx(r, Channel::Push, w.clock.now());
    let seen = w.record(&push.delivery_key).await;
    let died = transition(&*w.ledger, seen, die, &c).await.unwrap();
    assert!(matches!(died, Written::Applied(_)), "{died:?}");
    drain(w, Channel::Push).await;
    for &standby in &chain[1..] {
        let own = message(r, standby);
        w.enqueue(&own).await;
        let out = w.run(standby).await.unwrap();
        assert_eq!(out.records[0].action, Action::Ack, "not needed");
        assert_eq!(w.provider.calls_for(&own.delivery_key), 0);
    }
}

/// The operator redrives push's dead letter.
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
    w.enqueue(&message(r, Channel::Push)).await;
}

/// Seeds 131 and 291: the order is cleared after the standby was found not needed; the
/// redriven head then dies for a reason that falls back. Before, its hand-on read the order as
/// it was now (none), named nothing, and email was never sent.
#[tokio::test]
async fn a_redriven_head_hands_on_by_the_chain_its_claim_recorded() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("w4c1", &[Channel::Push, Channel::Email]).await;
    let sub = r.subscriber_id.clone();
    let order = prefs(json!({"fallback": ["push", "email"]}));
    w.store.put_preferences(&sub, &order).await.unwrap();
    head_dies_out_of_budget(&w, &r, &[Channel::Push, Channel::Email]).await;
    // The subscriber clears the order and opts out of push; the operator redrives it.
    let cleared = prefs(json!({"opted_out": ["push"]}));
    w.store.put_preferences(&sub, &cleared).await.unwrap();
    w.advance(300);
    redrive_push(&w, &r).await;
    drain(&w, Channel::Push).await;
    let push = w.record(&message(&r, Channel::Push).delivery_key).await;
    let push = push.unwrap();
    assert_eq!(push.dead_reason(), Some(DeadReason::OptedOut));
    assert_eq!(
        push.fallback_to(),
        Some(Channel::Email),
        "by the recorded chain"
    );
    drain(&w, Channel::Email).await;
    let email = message(&r, Channel::Email);
    assert_eq!(w.provider.calls_for(&email.delivery_key), 1, "sent once");
    let rec = w.record(&email.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Delivered);
    assert_eq!(rec.fallback_from(), Some(Channel::Push));
}

/// Seed 241: in a chain of three, the redriven head hands on to SMS, whose number an edit
/// moved abroad: it dies `country_not_allowed`, sending nothing. Before, that death named no
/// channel and enqueued nothing, and email (acknowledged as not needed) was never sent.
#[tokio::test]
async fn a_country_death_in_a_chain_of_three_hands_on_to_the_third() {
    let w = Mem::new(test_config(), true);
    let channels = [Channel::Push, Channel::Sms, Channel::Email];
    let mut r = reminder("w4c2", &channels);
    let abroad = Recipient::parse(Channel::Sms, "+447700900123").unwrap();
    r.recipients.insert(Channel::Sms, abroad);
    w.store.insert(&r).await.unwrap();
    let sub = r.subscriber_id.clone();
    let order = prefs(json!({"fallback": ["push", "sms", "email"]}));
    w.store.put_preferences(&sub, &order).await.unwrap();
    head_dies_out_of_budget(&w, &r, &channels).await;
    let opted = prefs(json!({"opted_out": ["push"], "fallback": ["push", "sms", "email"]}));
    w.store.put_preferences(&sub, &opted).await.unwrap();
    w.advance(300);
    redrive_push(&w, &r).await;
    drain(&w, Channel::Push).await;
    let push = w.record(&message(&r, Channel::Push).delivery_key).await;
    assert_eq!(push.unwrap().fallback_to(), Some(Channel::Sms));
    drain(&w, Channel::Sms).await;
    let sms = message(&r, Channel::Sms);
    assert_eq!(
        w.provider.calls_for(&sms.delivery_key),
        0,
        "never sent abroad"
    );
    let rec = w.record(&sms.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::CountryNotAllowed));
    assert_eq!(rec.fallback_to(), Some(Channel::Email), "hands on");
    drain(&w, Channel::Email).await;
    let email = message(&r, Channel::Email);
    assert_eq!(w.provider.calls_for(&email.delivery_key), 1, "sent once");
    let rec = w.record(&email.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Delivered);
    assert_eq!(rec.fallback_from(), Some(Channel::Sms));
}
