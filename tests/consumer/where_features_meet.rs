//! Where features meet, each proved by a test that failed before its fix: an edit against the
//! ledger's horizon, a fallback after an attempt that may have reached the person, a redrive
//! inside a chain, the breaker's probe and freshness, a redrive against the standby walk, a
//! reorder after the head's claim, and a channel removed then listed again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use reminders::clock::{Clock, Timestamp};
use reminders::consumer::Consumer;
use reminders::delivery::{self, transition, Claim, ClaimRequest, Written};
use reminders::domain::{
    Channel, DeadReason, Preferences, Recipient, Reminder, ReminderStatus, Retention,
};
use reminders::ledger::{Change, Ctx, LeaseToken, Origin, RedriveAudit, Status, Why};
use reminders::policy::RetryPolicy;
use reminders::ports::gate::BreakerChange;
use reminders::ports::{
    FaultPoint, Gate, Ledger, MemoryLedger, PortError, Provider, ReminderStore,
};
use reminders::reminder_writes::{Edit, Edited};
use reminders_harness::around::{Around, Call, Hook};
use reminders_harness::scripted::Answer;
use reminders_harness::ScriptedProvider;
use reminders_harness::{ManualClock, MemoryStack};
use serde_json::json;

use crate::harness::{message, queue_urls, reminder, test_config, Mem, T0};

fn prefs(v: serde_json::Value) -> Preferences {
    serde_json::from_value(v).unwrap()
}

fn ctx(r: &Reminder, channel: Channel, now: Timestamp) -> Ctx {
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

/// Claim `channel`'s delivery of `r` directly on the ledger (a worker that then crashed).
async fn claimed(ledger: &MemoryLedger, r: &Reminder, channel: Channel, now: Timestamp) {
    let req = ClaimRequest {
        token: LeaseToken::generate(
            &mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1),
        ),
        lease_expires_at: now.plus(Duration::from_secs(60)),
        payload_version: r.payload_version,
        policy: RetryPolicy::default(),
    };
    let got = delivery::claim(ledger, req, &ctx(r, channel, now))
        .await
        .unwrap();
    assert!(matches!(got, Claim::Acquired(_)), "{got:?}");
}

fn recipients(channels: &[Channel]) -> Vec<Recipient> {
    reminder("x", channels)
        .recipients
        .values()
        .cloned()
        .collect()
}

/// Run `channel` until its queue is empty, 30 s between polls.
async fn drain(w: &Mem, channel: Channel) {
    for _ in 0..200 {
        let _ = w.run(channel).await;
        if w.queue.len(channel) == 0 {
            return;
        }
        w.advance(30);
    }
    panic!("{channel} still busy");
}

/// An edit that moves a reminder far out while one of its deliveries is `sending` (its worker
/// crashed) moves that item's TTL too; and a claim that lands after the edit looked, under the
/// old version's horizon, is moved out when a message of the edited reminder is held for its new
/// due time. Before, only settled items moved, and a TTL could erase the proof of a send before
/// the ambiguous rule ran.
#[tokio::test]
async fn an_edit_far_out_moves_the_horizon_of_an_unsettled_delivery() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("w42", &[Channel::Push, Channel::Email]).await;
    claimed(&w.ledger, &r, Channel::Push, T0).await;
    let far = T0.plus(Duration::from_secs(30 * 86_400));
    let edit = Edit {
        due_at: Some(far),
        fresh_until: Some(far.plus(Duration::from_secs(3600))),
        ..Edit::default()
    };
    let retention = Retention::default();
    let Edited::Edited(v2) = w.edit(&r.reminder_id, edit).await.unwrap() else {
        panic!("edit refused")
    };
    let horizon = retention.expires_at(v2.fresh_until);
    let push = message(&r, Channel::Push);
    let rec = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Sending);
    assert!(
        rec.expires_at() >= horizon,
        "sending item kept the old horizon"
    );
    // Email is claimed by a worker that read the old version (after the edit looked).
    claimed(&w.ledger, &r, Channel::Email, T0).await;
    let email = message(&r, Channel::Email);
    assert!(w.record(&email.delivery_key).await.unwrap().expires_at() < horizon);
    // A duplicate of its message is held for the new due time: the horizon moves first.
    w.enqueue(&email).await;
    let out = w.run(Channel::Email).await.unwrap();
    assert!(out.response.batch_item_failures.is_empty(), "{out:?}");
    assert_eq!(w.provider.calls_for(&email.delivery_key), 0);
    let rec = w.record(&email.delivery_key).await.unwrap();
    assert!(rec.expires_at() >= horizon, "held past the old horizon");
    assert_eq!(rec.status(), Status::Sending, "nothing else changed");
}

/// An attempt that timed out after its request was written may have reached the person; when the
/// retry then finds the channel opted out, the death hands nothing on.
#[tokio::test]
async fn no_fallback_after_an_attempt_that_may_have_reached_the_person() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("w43", &[Channel::Push, Channel::Email]).await;
    let sub = r.subscriber_id.clone();
    let order = json!({"fallback": ["push", "email"]});
    w.store.put_preferences(&sub, &prefs(order)).await.unwrap();
    let (push, email) = (message(&r, Channel::Push), message(&r, Channel::Email));
    w.provider
        .script_for(&push.delivery_key, [Answer::AcceptedThenLost]);
    w.enqueue(&push).await;
    w.enqueue(&email).await;
    w.run(Channel::Push).await.unwrap();
    let rec = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Deferred, "ambiguous, to resend");
    assert!(rec.may_have_reached());
    let opted = json!({"opted_out": ["push"], "fallback": ["push", "email"]});
    w.store.put_preferences(&sub, &prefs(opted)).await.unwrap();
    drain(&w, Channel::Push).await;
    let dead = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(dead.dead_reason(), Some(DeadReason::OptedOut));
    chain_ended(&w, &dead, &email).await;
}

/// The push's death handed nothing on, and email, in standby behind it, is never sent.
async fn chain_ended(
    w: &Mem,
    dead: &reminders::ledger::DeliveryRecord,
    email: &reminders::domain::DeliveryMessage,
) {
    assert_eq!(
        dead.fallback_to(),
        None,
        "the chain ends at a maybe-sent push"
    );
    drain(w, Channel::Email).await;
    assert_eq!(
        w.provider.calls_for(&email.delivery_key),
        0,
        "email never sent"
    );
}

/// An attempt that may have reached the person, at the budget's end (found by the chaos worlds,
/// seed 1221): the last attempt's answer is lost, so the push dies `attempts_exhausted` although it
/// may have reached the person. The death records that, hands nothing on, and no later look of the
/// standby sends email. Before, the death kept no trace of the lost answer and named email as its
/// fallback.
#[tokio::test]
async fn a_last_attempt_whose_answer_was_lost_ends_the_chain() {
    // One delivery's failures alone must not open the breaker here.
    let mut cfg = test_config();
    cfg.breaker.failures = 100;
    let w = Mem::new(cfg, true);
    let r = w.reminder("w43b", &[Channel::Push, Channel::Email]).await;
    let order = json!({"fallback": ["push", "email"]});
    let sub = r.subscriber_id.clone();
    w.store.put_preferences(&sub, &prefs(order)).await.unwrap();
    let (push, email) = (message(&r, Channel::Push), message(&r, Channel::Email));
    let mut answers = vec![Answer::Transient; 4];
    answers.push(Answer::AcceptedThenLost);
    w.provider.script_for(&push.delivery_key, answers);
    w.enqueue(&push).await;
    w.enqueue(&email).await;
    drain(&w, Channel::Push).await;
    let dead = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(w.provider.calls_for(&push.delivery_key), 5);
    assert_eq!(dead.dead_reason(), Some(DeadReason::AttemptsExhausted));
    assert!(dead.may_have_reached(), "the last answer was lost");
    assert_eq!(
        dead.last_outcome_class(),
        Some(reminders::policy::OutcomeClass::Ambiguous),
        "a GET tells the lost answer, not the transient before it"
    );
    chain_ended(&w, &dead, &email).await;
}

/// The head first died for a reason that hands nothing on (its standby was acknowledged as not
/// needed), was redriven, and died again opted out: the fallback's message is refused by SQS. The
/// record fails instead of being acknowledged, and its next look enqueues the fallback again:
/// email is sent, once.
#[tokio::test]
async fn after_a_redrive_a_refused_fallback_message_strands_nothing() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("w44", &[Channel::Push, Channel::Email]).await;
    let sub = r.subscriber_id.clone();
    let order = json!({"fallback": ["push", "email"]});
    w.store.put_preferences(&sub, &prefs(order)).await.unwrap();
    let (push, email) = (message(&r, Channel::Push), message(&r, Channel::Email));
    // Push dies out of budget (handing nothing on) while email waits in standby.
    let c = ctx(&r, Channel::Push, T0);
    let token =
        LeaseToken::generate(&mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(3));
    let claim = Change::Claim {
        token: token.clone(),
        lease_expires_at: T0.plus(Duration::from_secs(60)),
        payload_version: 1,
        policy: RetryPolicy::default(),
    };
    transition(&*w.ledger, None, claim, &c).await.unwrap();
    let die = Change::Die {
        token: None,
        reason: DeadReason::AttemptsExhausted,
        spends_attempt: false,
        error: None,
        fallback_to: None,
        maybe_sent: false,
    };
    let seen = w.record(&push.delivery_key).await;
    let defer = Change::Defer {
        token,
        next_eligible_at: T0,
        class: reminders::policy::OutcomeClass::Transient,
        error: None,
    };
    transition(&*w.ledger, seen, defer, &c).await.unwrap();
    let seen = w.record(&push.delivery_key).await;
    assert!(matches!(
        transition(&*w.ledger, seen, die, &c).await.unwrap(),
        Written::Applied(_)
    ));
    w.enqueue(&email).await;
    let out = w.run(Channel::Email).await.unwrap();
    assert_eq!(
        out.records[0].action,
        reminders::consumer::Action::Ack,
        "not needed"
    );
    // The operator redrives push; the subscriber opts out of it meanwhile.
    let redrive = Change::Redrive {
        audit: RedriveAudit {
            batch_id: "b1".into(),
            operator: "op".into(),
            note: String::new(),
        },
        reasons: BTreeSet::from([DeadReason::AttemptsExhausted]),
    };
    assert!(matches!(
        transition(&*w.ledger, None, redrive, &c).await.unwrap(),
        Written::Applied(_)
    ));
    let opted = json!({"opted_out": ["push"], "fallback": ["push", "email"]});
    w.store.put_preferences(&sub, &prefs(opted)).await.unwrap();
    w.enqueue(&push).await;
    w.queue_faults
        .fail(reminders::ports::queue::OP_SEND, FaultPoint::Before, 1);
    let out = w.run(Channel::Push).await.unwrap();
    assert_eq!(
        out.response.batch_item_failures.len(),
        1,
        "not acknowledged"
    );
    let dead = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(dead.fallback_to(), Some(Channel::Email));
    // Push's message comes back, finds the death, and enqueues the fallback.
    w.advance(200);
    drain(&w, Channel::Push).await;
    drain(&w, Channel::Email).await;

    assert_eq!(
        w.provider.calls_for(&email.delivery_key),
        1,
        "email sent once"
    );
    assert_eq!(w.provider.calls_for(&push.delivery_key), 0);
}

/// A hook on a gate by which a probe's write takes `by` on the world's clock.
struct SlowProbe {
    clock: ManualClock,
    by: Duration,
}

impl Hook for SlowProbe {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        if let Call::Breaker {
            change: BreakerChange::Probe { .. },
            ..
        } = call
        {
            self.clock.advance(self.by);
        }
        Ok(())
    }
}

/// The breaker's probe is won by a write right before the send; a probe that took long enough for
/// the reminder to go stale is never sent.
#[tokio::test]
async fn a_probe_whose_write_outlasted_freshness_is_not_sent() {
    let stack = MemoryStack::on(ManualClock::at(T0));
    let MemoryStack {
        clock,
        ledger,
        gate,
        queue,
        ..
    } = stack.clone();
    let mut r = reminder("w45", &[Channel::Push]);
    r.fresh_until = T0.plus(Duration::from_secs(60));
    stack.store.insert(&r).await.unwrap();
    let provider = Arc::new(ScriptedProvider::new(clock.clone(), true));
    let push = message(&r, Channel::Push);
    let partition = provider.partition(Channel::Push);
    let open = BreakerChange::Open {
        now: T0,
        until: T0.plus(Duration::from_secs(45)),
    };
    assert!(gate.breaker(&partition, open).await.unwrap());
    clock.advance(Duration::from_secs(50));
    let slow = SlowProbe {
        clock: clock.clone(),
        by: Duration::from_secs(15),
    };
    let ports = stack
        .ports(provider.clone())
        .map_gate(|g| Around::new(g, slow));
    let consumer = Consumer::new(ports, test_config(), queue_urls(), 5);
    let entry = reminders::ports::OutgoingMessage {
        entry_id: "0".into(),
        body: push.encode(),
        delay_secs: 0,
    };
    use reminders::ports::DeliveryQueue;
    queue.send_batch(Channel::Push, &[entry]).await.unwrap();
    reminders_harness::mapping::Mapping::new(&queue_urls(), Channel::Push, 10, 180)
        .poll(&consumer, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        provider.calls_for(&push.delivery_key),
        0,
        "never sent stale"
    );
    let rec = ledger.get(&push.delivery_key).await.unwrap().unwrap();
    assert_eq!(rec.status(), Status::Expired);
}

/// A take-over from a death that named no channel: push died rejected when email was not listed; an
/// edit adds email, whose standby walk hands the reminder on from that death and sends it. The
/// hand-on is written on push's death first, so a redrive of push's dead letter is refused as for
/// any death that fell back.
#[tokio::test]
async fn a_redrive_of_a_death_the_walk_handed_on_is_refused() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("w46", &[Channel::Push]).await;
    let sub = r.subscriber_id.clone();
    let order = json!({"fallback": ["push", "email"]});
    w.store.put_preferences(&sub, &prefs(order)).await.unwrap();
    let push = message(&r, Channel::Push);
    w.provider
        .script_for(&push.delivery_key, [Answer::Permanent]);
    w.enqueue(&push).await;
    w.run(Channel::Push).await.unwrap();
    let dead = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(dead.dead_reason(), Some(DeadReason::Rejected));
    assert_eq!(dead.fallback_to(), None, "email was not listed");
    let add = Edit {
        recipients: Some(recipients(&[Channel::Push, Channel::Email])),
        ..Edit::default()
    };
    let Edited::Edited(v2) = w.edit(&r.reminder_id, add).await.unwrap() else {
        panic!("edit refused")
    };
    let email = message(&v2, Channel::Email);
    w.enqueue(&email).await;
    w.run(Channel::Email).await.unwrap();
    assert_eq!(
        w.provider.calls_for(&email.delivery_key),
        1,
        "email took over"
    );
    let redrive = Change::Redrive {
        audit: RedriveAudit {
            batch_id: "b1".into(),
            operator: "op".into(),
            note: String::new(),
        },
        reasons: BTreeSet::from([DeadReason::Rejected]),
    };
    let got = transition(&*w.ledger, None, redrive, &ctx(&r, Channel::Push, T0))
        .await
        .unwrap();
    match got {
        Written::Refused { refused, .. } => assert_eq!(refused.why, Why::FellBack(Channel::Email)),
        other => panic!("push redriven after email served the reminder: {other:?}"),
    }
}

/// A reorder at the head's first claim: with `[push, email]`, push is claimed; the order is then
/// reversed. Email is not the head for this reminder: it waits on push, and once push is delivered
/// it is not needed. Before, email saw itself first in the order and was sent too.
#[tokio::test]
async fn a_reorder_after_the_head_was_claimed_sends_one_channel() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("w47", &[Channel::Push, Channel::Email]).await;
    let sub = r.subscriber_id.clone();
    let order = json!({"fallback": ["push", "email"]});
    w.store.put_preferences(&sub, &prefs(order)).await.unwrap();
    let (push, email) = (message(&r, Channel::Push), message(&r, Channel::Email));
    w.enqueue(&push).await;
    w.run(Channel::Push).await.unwrap();
    assert_eq!(
        w.provider.calls_for(&push.delivery_key),
        1,
        "push delivered"
    );
    let reversed = json!({"fallback": ["email", "push"]});
    w.store
        .put_preferences(&sub, &prefs(reversed.clone()))
        .await
        .unwrap();
    w.enqueue(&email).await;
    drain(&w, Channel::Email).await;
    assert_eq!(
        w.provider.calls_for(&email.delivery_key),
        0,
        "one channel only"
    );
    // And while push is still in flight: email waits for it.
    let r2 = w.reminder("w47b", &[Channel::Push, Channel::Email]).await;
    let (push2, email2) = (message(&r2, Channel::Push), message(&r2, Channel::Email));
    w.store
        .put_preferences(&sub, &prefs(json!({"fallback": ["push", "email"]})))
        .await
        .unwrap();
    claimed(&w.ledger, &r2, Channel::Push, w.clock.now()).await;
    w.store
        .put_preferences(&sub, &prefs(reversed.clone()))
        .await
        .unwrap();
    w.enqueue(&email2).await;
    let out = w.run(Channel::Email).await.unwrap();
    assert!(matches!(
        out.records[0].action,
        reminders::consumer::Action::Hold { .. }
    ));
    assert_eq!(w.provider.calls_for(&email2.delivery_key), 0);
    let _ = push2;
}

/// A channel removed by one edit after it was enqueued, and listed again by the next, is refused
/// (its delivery ends cancelled as edited away and its key can never send again) instead of being
/// acknowledged and never sent.
#[tokio::test]
async fn a_channel_removed_after_enqueue_cannot_be_listed_again() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("w48", &[Channel::Push, Channel::Email]).await;
    w.mark_enqueued(&r).await;
    let only_push = Edit {
        recipients: Some(recipients(&[Channel::Push])),
        ..Edit::default()
    };
    let got = w.edit(&r.reminder_id, only_push).await.unwrap();
    assert!(matches!(got, Edited::Edited(_)), "{got:?}");
    let both = Edit {
        recipients: Some(recipients(&[Channel::Push, Channel::Email])),
        ..Edit::default()
    };
    let got = w.edit(&r.reminder_id, both).await.unwrap();
    assert_eq!(got, Edited::Readded(Channel::Email));
    // A channel never enqueued may come and go freely.
    let r2 = w.reminder("w48b", &[Channel::Push, Channel::Email]).await;
    let only_push = Edit {
        recipients: Some(recipients(&[Channel::Push])),
        ..Edit::default()
    };
    w.edit(&r2.reminder_id, only_push).await.unwrap();
    let both = Edit {
        recipients: Some(recipients(&[Channel::Push, Channel::Email])),
        ..Edit::default()
    };
    let got = w.edit(&r2.reminder_id, both).await.unwrap();
    assert!(matches!(got, Edited::Edited(_)), "{got:?}");
}

/// Found by the chaos worlds once the reminders table's writes could be sent again: the scheduler
/// enqueued both channels and stopped before its write that records the enqueue, so the reminder
/// still reads `scheduled` with nothing enqueued. An edit takes email away; email's message, still
/// on its way, ends its delivery cancelled as edited away. An edit that lists email again was
/// acknowledged and email never went: it is refused, as when the enqueue was recorded.
#[tokio::test]
async fn a_channel_edited_away_before_its_enqueue_was_recorded_cannot_be_listed_again() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("w48c", &[Channel::Push, Channel::Email]).await;
    // Enqueued, the enqueue never recorded.
    let email = message(&r, Channel::Email);
    w.enqueue(&email).await;
    let only_push = Edit {
        recipients: Some(recipients(&[Channel::Push])),
        ..Edit::default()
    };
    let got = w.edit(&r.reminder_id, only_push).await.unwrap();
    assert!(matches!(got, Edited::Edited(_)), "{got:?}");
    w.run(Channel::Email).await.unwrap();
    let key = &email.delivery_key;
    let rec = w.ledger.get(key).await.unwrap().expect("email's item");
    assert_eq!(rec.status(), Status::Cancelled, "edited away");
    let both = Edit {
        recipients: Some(recipients(&[Channel::Push, Channel::Email])),
        ..Edit::default()
    };
    let got = w.edit(&r.reminder_id, both).await.unwrap();
    assert_eq!(got, Edited::Readded(Channel::Email));
    assert_eq!(w.provider.calls_for(key), 0);
}

/// Found by the chaos worlds once they ordered every subscriber's channels: with `[push, email]`,
/// push is delivered, then an edit removes push. Email, now the reminder's only channel, went out
/// as if alone. A channel an edit removed after it may have reached the person still ends the
/// chain; one removed mid-send is waited for.
#[tokio::test]
async fn a_channel_removed_after_it_reached_the_person_still_ends_the_chain() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("w47c", &[Channel::Push, Channel::Email]).await;
    let sub = r.subscriber_id.clone();
    let order = json!({"fallback": ["push", "email"]});
    w.store.put_preferences(&sub, &prefs(order)).await.unwrap();
    let push = message(&r, Channel::Push);
    w.enqueue(&push).await;
    w.run(Channel::Push).await.unwrap();
    assert_eq!(
        w.provider.calls_for(&push.delivery_key),
        1,
        "push delivered"
    );
    let email = message(&only_email(&w, &r).await, Channel::Email);
    w.enqueue(&email).await;
    drain(&w, Channel::Email).await;
    assert_eq!(
        w.provider.calls_for(&email.delivery_key),
        0,
        "push reached the person: email is not needed"
    );
    // Removed mid-send: email waits for push's lease.
    let r2 = w.reminder("w47d", &[Channel::Push, Channel::Email]).await;
    claimed(&w.ledger, &r2, Channel::Push, w.clock.now()).await;
    let email2 = message(&only_email(&w, &r2).await, Channel::Email);
    w.enqueue(&email2).await;
    let out = w.run(Channel::Email).await.unwrap();
    let action = &out.records[0].action;
    assert!(
        matches!(action, reminders::consumer::Action::Hold { .. }),
        "{action:?}"
    );
    assert_eq!(w.provider.calls_for(&email2.delivery_key), 0);
}

/// Edit `r` down to email alone, as a PUT would: the edited version.
async fn only_email(w: &Mem, r: &Reminder) -> Reminder {
    let edit = Edit {
        recipients: Some(recipients(&[Channel::Email])),
        ..Edit::default()
    };
    let got = w.edit(&r.reminder_id, edit).await.unwrap();
    let Edited::Edited(edited) = got else {
        panic!("{got:?}")
    };
    assert_eq!(
        edited.listed_channels().collect::<Vec<_>>(),
        [Channel::Email]
    );
    edited
}

/// The consumer's twin of a stale edit racing the expiry, found by the chaos worlds (seed 625 of
/// 1,300): a message of an enqueued reminder found stale, an application's reschedule landing
/// before the consumer wrote `expired`, and the ledger said expired for the version the API had
/// just acknowledged fresh. The consumer now marks the reminder expired at the version it read
/// first: the edit that came first wins, and the next look sends it.
#[tokio::test]
async fn an_edit_that_lands_during_the_consumers_expiry_wins() {
    use reminders::ports::{DeliveryQueue, OutgoingMessage};
    let now = T0.plus(Duration::from_secs(7_200));
    let stack = MemoryStack::on(ManualClock::at(now));
    let MemoryStack {
        clock,
        store: inner,
        ledger,
        queue,
        ..
    } = stack.clone();
    let r = reminder("w41c", &[Channel::Push]);
    assert!(r.is_stale_at(now));
    inner.insert(&r).await.unwrap();
    let enqueued = inner
        .mark(&r.reminder_id, r.payload_version, ReminderStatus::Enqueued)
        .await
        .unwrap();
    assert_eq!(enqueued, reminders::ports::Marked::Marked);
    let reschedule = Edit {
        due_at: Some(now),
        fresh_until: Some(now.plus(Duration::from_secs(3600))),
        ..Edit::default()
    };
    let provider = Arc::new(ScriptedProvider::new(clock.clone(), true));
    let ports = stack.ports(provider.clone()).map_reminders(|table| {
        crate::support::edit_before_mark::EditBeforeMark::around(
            table,
            ledger.clone(),
            reschedule,
            now,
        )
    });
    let consumer = Consumer::new(ports, test_config(), queue_urls(), 7);
    let msg = message(&r, Channel::Push);
    let entry = OutgoingMessage {
        entry_id: "0".into(),
        body: msg.encode(),
        delay_secs: 0,
    };
    queue.send_batch(Channel::Push, &[entry]).await.unwrap();
    let urls = queue_urls();
    for _ in 0..5 {
        let _ = reminders_harness::mapping::Mapping::new(&urls, Channel::Push, 10, 180)
            .poll(&consumer, None)
            .await;
        clock.advance(Duration::from_secs(2));
    }
    let rec = ledger.get(&msg.delivery_key).await.unwrap();
    assert_eq!(
        rec.as_ref().map(|r| r.status()),
        Some(Status::Delivered),
        "the rescheduled version is sent, never expired: {rec:?}"
    );
    assert_eq!(provider.calls_for(&msg.delivery_key), 1);
    let stored = inner.get(&r.reminder_id).await.unwrap().unwrap();
    assert_eq!(stored.payload_version, 2);
    assert_ne!(stored.status, ReminderStatus::Expired);
}
