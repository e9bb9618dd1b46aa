//! Redrive on the emulator: dry runs, filters and bounds, replays that send nothing twice, a
//! crash between re-enqueue and delete, crash-looped messages without attributes, staleness.

use reminders_test_support as support;

mod series;

use std::collections::BTreeSet;

use reminders::aws::bootstrap::QueueSpec;
use reminders::deadletter::{DeadLetter, Evidence};
use reminders::domain::{Channel, DeadReason, DeliveryMessage, Reminder};
use reminders::ledger::Status;
use reminders::ports::queue::OP_DELETE;
use reminders::ports::{
    DeadLetters, DeliveryQueue, FaultPoint, Ledger, OutgoingMessage, ReminderStore,
};
use reminders::redrive::{RedriveConfig, RedriveRequest, Redriver};
use reminders_harness::scripted::Answer;

use support::{now, reminder, AwsPorts, AwsWorld};

const SMS: Channel = Channel::Sms;

fn request(reasons: &[DeadReason], max: u32, dry_run: bool) -> RedriveRequest {
    RedriveRequest {
        channel: SMS,
        reasons: reasons.iter().copied().collect::<BTreeSet<_>>(),
        first_seen_after: None,
        first_seen_before: None,
        dead_after: None,
        dead_before: None,
        max_messages: max,
        max_per_second: 1000,
        dry_run,
        operator: "ana".into(),
        note: "provider fixed".into(),
        extend_freshness_secs: None,
        accept_duplicates: false,
    }
}

fn redriver(w: &AwsWorld) -> Redriver<AwsPorts> {
    let cfg = RedriveConfig {
        hold_secs: 60,
        ..RedriveConfig::default()
    };
    Redriver::new(w.ports.clone(), cfg, 5)
}

fn letter(reason: DeadReason) -> DeadLetter {
    DeadLetter::new(
        reason,
        Evidence {
            attempts: 3,
            first_seen_at: Some(now()),
            dead_at: now(),
            last_error: Some("http_503".into()),
            policy_version: Some("v1-default".into()),
            source_queue: "sms".into(),
        },
    )
}

/// A stored reminder and its message, dead-lettered as `reason` (no ledger item: the
/// delivery is still `scheduled`).
async fn dead(w: &AwsWorld, id: &str, reason: DeadReason) -> (Reminder, DeliveryMessage) {
    let r = reminder(id, SMS);
    w.ports.reminders.insert(&r).await.unwrap();
    let msg = support_message(&r);
    w.ports
        .dead_letters
        .dead_letter(SMS, &msg.encode(), &letter(reason))
        .await
        .unwrap();
    (r, msg)
}

/// A stored reminder whose message is on the queue and whose provider will reject it.
async fn rejected_on_send(w: &AwsWorld, id: &str) -> (Reminder, DeliveryMessage) {
    let r = reminder(id, SMS);
    w.ports.reminders.insert(&r).await.unwrap();
    let msg = support_message(&r);
    w.provider
        .script_for(&msg.delivery_key, [Answer::Permanent]);
    let entry = OutgoingMessage {
        entry_id: "0".into(),
        body: msg.encode(),
        delay_secs: 0,
    };
    w.ports.queue.send_batch(SMS, &[entry]).await.unwrap();
    (r, msg)
}

fn support_message(r: &Reminder) -> DeliveryMessage {
    DeliveryMessage::new(
        r.reminder_id.clone(),
        r.subscriber_id.clone(),
        SMS,
        r.payload_version,
        r.due_at,
        r.fresh_until,
    )
}

async fn dlq_len(w: &AwsWorld) -> usize {
    let d = &w.ports.dead_letters;
    let mut n = 0;
    loop {
        let got = d.receive_dead(SMS, 10, 30).await.unwrap();
        if got.is_empty() {
            break;
        }
        n += got.len();
    }
    n
}

async fn queue_messages(w: &AwsWorld) -> Vec<DeliveryMessage> {
    let q = &w.ports.queue;
    let mut out = Vec::new();
    loop {
        let got = q.receive(SMS, 10, 30).await.unwrap();
        if got.is_empty() {
            return out;
        }
        out.extend(
            got.iter()
                .map(|m| DeliveryMessage::decode(&m.body).unwrap()),
        );
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_dry_run_moves_nothing_and_counts_each_message_once_by_reason() {
    let w = AwsWorld::new(QueueSpec {
        max_receive_count: 1,
        ..QueueSpec::default()
    })
    .await;
    for i in 0..3 {
        dead(&w, &format!("a{i}"), DeadReason::AttemptsExhausted).await;
    }
    for i in 0..2 {
        dead(&w, &format!("r{i}"), DeadReason::Rejected).await;
    }
    // One crash-looped message, moved by the queue's redrive policy: no attributes.
    let looped = reminder("looped", SMS);
    let entry = OutgoingMessage {
        entry_id: "0".into(),
        body: support_message(&looped).encode(),
        delay_secs: 0,
    };
    w.ports.queue.send_batch(SMS, &[entry]).await.unwrap();
    for _ in 0..3 {
        w.ports.queue.receive(SMS, 10, 0).await.unwrap();
    }
    let reasons = [
        DeadReason::AttemptsExhausted,
        DeadReason::Rejected,
        DeadReason::ReceiveCountExceeded,
    ];
    for run in 0..2 {
        let summary = redriver(&w)
            .run(&request(&reasons, 100, true), None)
            .await
            .unwrap();
        let by = |r: DeadReason| summary.by_reason.get(&r).copied().unwrap_or_default();
        assert_eq!(by(DeadReason::AttemptsExhausted).seen, 3, "run {run}");
        assert_eq!(by(DeadReason::Rejected).seen, 2, "run {run}");
        assert_eq!(by(DeadReason::ReceiveCountExceeded).seen, 1, "run {run}");
        let total = summary.total();
        assert_eq!((total.matched, total.moved, total.released), (6, 0, 6));
        assert!(summary.dry_run);
    }
    assert!(queue_messages(&w).await.is_empty(), "nothing moved");
    assert_eq!(dlq_len(&w).await, 6);
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_reason_filter_moves_only_its_reason_within_the_bound() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    for i in 0..15 {
        dead(&w, &format!("a{i:02}"), DeadReason::AttemptsExhausted).await;
    }
    for i in 0..5 {
        dead(&w, &format!("r{i}"), DeadReason::Rejected).await;
    }
    let summary = redriver(&w)
        .run(&request(&[DeadReason::AttemptsExhausted], 10, false), None)
        .await
        .unwrap();
    let moved = summary.by_reason[&DeadReason::AttemptsExhausted].moved;
    assert_eq!(moved, 10, "the bound holds");
    assert_eq!(
        summary
            .by_reason
            .get(&DeadReason::Rejected)
            .map_or(0, |c| c.moved),
        0
    );
    let sent = queue_messages(&w).await;
    assert_eq!(sent.len(), 10);
    for m in &sent {
        let marker = m.redrive.as_ref().expect("redrive marker");
        assert_eq!(
            (marker.batch_id.as_str(), marker.operator.as_str()),
            (summary.batch_id.as_str(), "ana")
        );
        assert!(m.reminder_id.as_str().starts_with('a'));
    }
    assert_eq!(
        dlq_len(&w).await,
        10,
        "5 rejected and 5 over the bound remain"
    );
}

/// Real dead deliveries (the consumer got permanent errors), redriven, delivered, then the
/// same batch redriven again: nothing twice.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn redriving_the_same_batch_twice_sends_nothing_twice() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let consumer = w.consumer();
    let mut msgs = Vec::new();
    for i in 0..3 {
        let (_, msg) = rejected_on_send(&w, &format!("p{i}")).await;
        msgs.push(msg);
    }
    w.consume(&consumer, SMS).await;
    for m in &msgs {
        let rec = w.ports.ledger.get(&m.delivery_key).await.unwrap().unwrap();
        assert_eq!(rec.status(), Status::Dead);
    }
    let req = request(&[DeadReason::Rejected], 100, false);
    let first = redriver(&w).run(&req, None).await.unwrap();
    assert_eq!(first.by_reason[&DeadReason::Rejected].moved, 3);
    for m in &msgs {
        let rec = w.ports.ledger.get(&m.delivery_key).await.unwrap().unwrap();
        assert_eq!(
            (rec.status(), rec.attempt_count()),
            (Status::Ready, 0),
            "fresh budget"
        );
        let audit = rec.history().last().unwrap().1.redrive.clone().unwrap();
        assert_eq!(
            (audit.operator.as_str(), audit.note.as_str()),
            ("ana", "provider fixed")
        );
    }
    w.consume(&consumer, SMS).await;
    // The same batch again: its DLQ copies are back (as if their deletes had been lost).
    for m in &msgs {
        w.ports
            .dead_letters
            .dead_letter(SMS, &m.encode(), &letter(DeadReason::Rejected))
            .await
            .unwrap();
    }
    let second = redriver(&w).run(&req, None).await.unwrap();
    let c = second.by_reason[&DeadReason::Rejected];
    assert_eq!(
        (c.moved, c.skipped),
        (0, 3),
        "already delivered: skipped and removed"
    );
    assert_eq!(dlq_len(&w).await, 0);
    w.consume(&consumer, SMS).await;
    for m in &msgs {
        assert_eq!(
            w.provider.acceptances_for(&m.delivery_key),
            1,
            "one send per delivery"
        );
        assert_eq!(
            w.provider.calls_for(&m.delivery_key),
            2,
            "the rejected one and the redriven one"
        );
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_crash_between_re_enqueue_and_delete_is_harmless() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let consumer = w.consumer();
    let (_, a) = dead(&w, "x1", DeadReason::AttemptsExhausted).await;
    let (_, b) = dead(&w, "x2", DeadReason::AttemptsExhausted).await;
    w.faults.fail(OP_DELETE, FaultPoint::Before, 2);
    let req = request(&[DeadReason::AttemptsExhausted], 10, false);
    let crashed = redriver(&w).run(&req, None).await.unwrap();
    assert_eq!(crashed.by_reason[&DeadReason::AttemptsExhausted].failed, 2);
    // Re-enqueued, yet still in the DLQ; the next run resends them (ledger: still scheduled).
    let again = redriver(&w).run(&req, None).await.unwrap();
    assert_eq!(again.by_reason[&DeadReason::AttemptsExhausted].moved, 2);
    assert_eq!(dlq_len(&w).await, 0);
    w.consume(&consumer, SMS).await;
    for m in [&a, &b] {
        assert_eq!(
            w.provider.calls_for(&m.delivery_key),
            1,
            "two copies, one send"
        );
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn crash_looped_messages_redrive_as_receive_count_exceeded() {
    let w = AwsWorld::new(QueueSpec {
        max_receive_count: 1,
        ..QueueSpec::default()
    })
    .await;
    let r = reminder("looped", SMS);
    w.ports.reminders.insert(&r).await.unwrap();
    let msg = support_message(&r);
    let entry = OutgoingMessage {
        entry_id: "0".into(),
        body: msg.encode(),
        delay_secs: 0,
    };
    w.ports.queue.send_batch(SMS, &[entry]).await.unwrap();
    for _ in 0..3 {
        w.ports.queue.receive(SMS, 10, 0).await.unwrap();
    }
    let summary = redriver(&w)
        .run(
            &request(&[DeadReason::ReceiveCountExceeded], 10, false),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        summary.by_reason[&DeadReason::ReceiveCountExceeded].moved,
        1
    );
    assert!(
        w.ports
            .ledger
            .get(&msg.delivery_key)
            .await
            .unwrap()
            .is_none(),
        "stays scheduled"
    );
    w.consume(&w.consumer(), SMS).await;
    let rec = w
        .ports
        .ledger
        .get(&msg.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status(), Status::Delivered);
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn stale_deliveries_stay_unless_freshness_is_extended() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let mut r = reminder("old", SMS);
    r.due_at = now().minus(std::time::Duration::from_secs(7200));
    r.fresh_until = now().minus(std::time::Duration::from_secs(60));
    w.ports.reminders.insert(&r).await.unwrap();
    let msg = support_message(&r);
    w.ports
        .dead_letters
        .dead_letter(SMS, &msg.encode(), &letter(DeadReason::ThrottleExhausted))
        .await
        .unwrap();
    let mut req = request(&[DeadReason::ThrottleExhausted], 10, false);
    let stale = redriver(&w).run(&req, None).await.unwrap();
    let c = stale.by_reason[&DeadReason::ThrottleExhausted];
    assert_eq!((c.stale, c.moved, c.released), (1, 0, 1));
    req.extend_freshness_secs = Some(600);
    let extended = redriver(&w).run(&req, None).await.unwrap();
    assert_eq!(extended.by_reason[&DeadReason::ThrottleExhausted].moved, 1);
    let now_r = w
        .ports
        .reminders
        .get(&r.reminder_id)
        .await
        .unwrap()
        .unwrap();
    assert!(now_r.fresh_until > now());
    w.consume(&w.consumer(), SMS).await;
    assert_eq!(w.provider.acceptances_for(&msg.delivery_key), 1);
}

/// The operator's reasons reach the ledger: a DLQ copy that says one reason (a stale copy, a
/// crash-looped one) cannot redrive a delivery the ledger holds dead for another. And
/// `ambiguous` is only redriven with explicit consent to duplicates.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn redrive_follows_the_ledgers_dead_reason() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let consumer = w.consumer();
    let (_, msg) = rejected_on_send(&w, "held-ambiguous").await;
    w.consume(&consumer, SMS).await;
    assert_eq!(
        dlq_len(&w).await,
        1,
        "its own copy (held, then visible again)"
    );
    // A copy claiming another reason, as a crash loop leaves it (no attributes).
    w.ports
        .dead_letters
        .dead_letter(SMS, &msg.encode(), &letter(DeadReason::AttemptsExhausted))
        .await
        .unwrap();
    let req = request(&[DeadReason::AttemptsExhausted], 10, false);
    let run = redriver(&w).run(&req, None).await.unwrap();
    let c = run.by_reason[&DeadReason::AttemptsExhausted];
    assert_eq!((c.moved, c.refused), (0, 1), "{run:?}");
    let rec = w
        .ports
        .ledger
        .get(&msg.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status(), Status::Dead);
    assert_eq!(rec.dead_reason(), Some(DeadReason::Rejected));
    assert!(queue_messages(&w).await.is_empty(), "nothing re-enqueued");

    // A delivery the ledger holds dead as ambiguous: redriven only with consent.
    let r2 = reminder("was-ambiguous", SMS);
    w.ports.reminders.insert(&r2).await.unwrap();
    let msg2 = support_message(&r2);
    let ctx = reminders::ledger::Ctx {
        key: msg2.delivery_key.clone(),
        now: now(),
        expires_at: r2.expires_at,
        origin: None,
    };
    let token = reminders::ledger::LeaseToken::generate(&mut rand::rng());
    let req_claim = reminders::delivery::ClaimRequest {
        token: token.clone(),
        lease_expires_at: now().plus(std::time::Duration::from_secs(60)),
        payload_version: 1,
        policy: reminders::policy::RetryPolicy::default(),
    };
    let reminders::delivery::Claim::Acquired(held) =
        reminders::delivery::claim(&w.ports.ledger, req_claim, &ctx)
            .await
            .unwrap()
    else {
        panic!("claim")
    };
    let die = reminders::ledger::Change::Die {
        token: Some(token),
        reason: DeadReason::Ambiguous,
        spends_attempt: true,
        error: Some("timeout_after_write".into()),
        fallback_to: None,
        maybe_sent: false,
    };
    reminders::delivery::transition(&w.ports.ledger, Some(held), die, &ctx)
        .await
        .unwrap();
    w.ports
        .dead_letters
        .dead_letter(SMS, &msg2.encode(), &letter(DeadReason::Ambiguous))
        .await
        .unwrap();
    let mut ambiguous = request(&[DeadReason::Ambiguous], 10, false);
    let refused = redriver(&w).run(&ambiguous, None).await.unwrap_err();
    assert!(
        refused.to_string().contains("accept_duplicates"),
        "{refused}"
    );
    let rec = w
        .ports
        .ledger
        .get(&msg2.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status(), Status::Dead, "nothing moved without consent");
    ambiguous.accept_duplicates = true;
    let run = redriver(&w).run(&ambiguous, None).await.unwrap();
    assert_eq!(run.by_reason[&DeadReason::Ambiguous].moved, 1, "{run:?}");
    let rec = w
        .ports
        .ledger
        .get(&msg2.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status(), Status::Ready);
}

/// A cancel against a redrive: a cancel's ledger write lands on a dead delivery, and a redrive
/// runs before the cancel marks the reminder. The ledger orders them: `dead → cancelled`, and the
/// redrive refuses a cancelled delivery, so nothing is sent after the cancel was answered.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_cancel_of_a_dead_delivery_is_ordered_before_a_redrive() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let consumer = w.consumer();
    let (r, msg) = rejected_on_send(&w, "w1-cancel-redrive").await;
    w.consume(&consumer, SMS).await;
    let rec = w
        .ports
        .ledger
        .get(&msg.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status(), Status::Dead);
    // The cancel's first step: the ledger. Its mark on the reminder has not landed yet.
    let ctx = reminders::ledger::Ctx {
        key: msg.delivery_key.clone(),
        now: now(),
        expires_at: r.expires_at,
        origin: None,
    };
    let answer = reminders::delivery::cancel(&w.ports.ledger, &ctx)
        .await
        .unwrap();
    assert_eq!(answer, reminders::delivery::Cancelled::Cancelled);
    let req = request(&[DeadReason::Rejected], 10, false);
    let run = redriver(&w).run(&req, None).await.unwrap();
    let c = run.by_reason[&DeadReason::Rejected];
    assert_eq!((c.moved, c.skipped), (0, 1), "{run:?}");
    assert_eq!(dlq_len(&w).await, 0, "the moot copy is removed");
    w.consume(&consumer, SMS).await;
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 1, "never resent");
    let rec = w
        .ports
        .ledger
        .get(&msg.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status(), Status::Cancelled);
    let (_, last) = *rec.history().last().unwrap();
    assert_eq!(
        last.detail.as_deref(),
        Some("cancelled while dead (rejected)")
    );
}
