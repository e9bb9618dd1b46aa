//! The consumer's whole outcome matrix on in-memory ports.

use std::sync::Arc;
use std::time::Duration;

use reminders::consumer::{Action, ConsumerConfig};
use reminders::domain::reminder::{surely_stale_at, CLOCK_MARGIN};
use reminders::domain::{Channel, DeadReason, ReminderStatus};
use reminders::ledger::Status;
use reminders::policy::{Backoff, RetryPolicy};
use reminders::ports::ledger::OP_PUT;
use reminders::ports::reminders::OP_GET;
use reminders::ports::{FaultPoint, ReminderStore};
use reminders_harness::mapping::Mapping;
use reminders_harness::scripted::Answer;

use crate::harness::{message, test_config, Mem, T0};

const SMS: Channel = Channel::Sms;

fn actions(o: &reminders::consumer::BatchOutcome) -> Vec<Action> {
    o.records.iter().map(|r| r.action).collect()
}

#[tokio::test]
async fn delivered_is_acked_with_one_call_and_recorded() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    w.advance(2);
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Ack]);
    assert!(out.response.batch_item_failures.is_empty());
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 1);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Delivered);
    assert_eq!(rec.attempt_count(), 1);
    assert!(rec.provider_receipt().is_some());
    let m = out.metrics.get(SMS);
    assert_eq!(m.delivered, 1);
    assert_eq!(m.lateness_ms, [2_000]);
    assert_eq!(w.queue.len(SMS), 0, "acked messages are deleted");
}

/// Lateness feeds the SLO alarm: an operator's redrive is not late delivery, so it records
/// none (a replay of a days-old death would page).
#[tokio::test]
async fn a_redriven_delivery_records_no_lateness() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS]).await;
    let mut msg = message(&r, SMS);
    msg.redrive = Some(reminders::domain::RedriveMarker {
        batch_id: "rd-1".into(),
        operator: "ops".into(),
        at: msg.due_at,
    });
    w.enqueue(&msg).await;
    w.advance(2);
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Ack]);
    let m = out.metrics.get(SMS);
    assert_eq!((m.delivered, m.lateness_ms.len()), (1, 0));
}

#[tokio::test]
async fn the_same_message_twice_in_sequence_sends_once() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    w.run(SMS).await.unwrap();
    w.enqueue(&msg).await;
    let second = w.run(SMS).await.unwrap();
    assert_eq!(actions(&second), [Action::Ack]);
    assert_eq!(second.metrics.get(SMS).duplicates_suppressed, 1);
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_message_twice_concurrently_sends_once() {
    for round in 0..10 {
        let w = Arc::new(Mem::new(test_config(), true));
        let r = w.reminder(&format!("r{round}"), &[SMS]).await;
        let msg = message(&r, SMS);
        w.enqueue(&msg).await;
        w.enqueue(&msg).await;
        // Two receives, two handler calls at once: one message each.
        let mapping = Mapping::new(&crate::harness::queue_urls(), SMS, 1, 180);
        let received_a = mapping.receive(&w.queue).await.unwrap().expect("one");
        let received_b = mapping.receive(&w.queue).await.unwrap().expect("the other");
        let (wa, wb) = (w.clone(), w.clone());
        let (ea, eb) = (received_a.event, received_b.event);
        let a = tokio::spawn(async move { wa.consumer.handle(ea, None).await });
        let b = tokio::spawn(async move { wb.consumer.handle(eb, None).await });
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        assert_eq!(w.provider.calls_for(&msg.delivery_key), 1, "round {round}");
        let delivered = a.metrics.get(SMS).delivered + b.metrics.get(SMS).delivered;
        assert_eq!(delivered, 1);
    }
}

#[tokio::test]
async fn throttle_spends_no_attempt_closes_the_gate_and_waits_for_retry_after() {
    let w = Mem::new(test_config(), true);
    let r1 = w.reminder("r1", &[SMS]).await;
    let r2 = w.reminder("r2", &[SMS]).await;
    let (m1, m2) = (message(&r1, SMS), message(&r2, SMS));
    w.provider
        .script_for(&m1.delivery_key, [Answer::ThrottleSecs(30)]);
    w.enqueue(&m1).await;
    let out = w.run(SMS).await.unwrap();
    let [Action::Hold { secs }] = actions(&out)[..] else {
        panic!("{:?}", out.records)
    };
    assert!((30..=33).contains(&secs), "held {secs}s");
    assert_eq!(out.response.batch_item_failures.len(), 1);
    assert_eq!(out.metrics.get(SMS).deferred_provider, 1);
    let rec = w.record(&m1.delivery_key).await.unwrap();
    assert_eq!(
        (rec.status(), rec.attempt_count(), rec.throttle_count()),
        (Status::Deferred, 0, 1)
    );
    // Another delivery to the same provider partition waits at the gate, without a call.
    w.enqueue(&m2).await;
    w.advance(1);
    let gated = w.run(SMS).await.unwrap();
    assert_eq!(gated.metrics.get(SMS).deferred_gate, 1);
    assert_eq!(w.provider.calls_for(&m2.delivery_key), 0);
    // Before Retry-After nothing is visible, so nothing is called.
    w.advance(20);
    assert!(w.run(SMS).await.is_none());
    assert_eq!(w.provider.total_calls(), 1);
    w.advance(15);
    w.run_until_idle(SMS, 0, 20).await;
    assert_eq!(w.provider.calls_for(&m1.delivery_key), 2);
    assert_eq!(w.provider.calls_for(&m2.delivery_key), 1);
    assert_eq!(
        w.record(&m1.delivery_key).await.unwrap().status(),
        Status::Delivered
    );
}

#[tokio::test]
async fn throttle_with_an_http_date_or_without_retry_after() {
    for (answer, min, max) in [
        (Answer::ThrottleHttpDate(40), 40, 46),
        (Answer::Throttle, 1, 5),
    ] {
        let w = Mem::new(test_config(), true);
        let r = w.reminder("r1", &[SMS]).await;
        let msg = message(&r, SMS);
        w.provider.script_for(&msg.delivery_key, [answer.clone()]);
        w.enqueue(&msg).await;
        let out = w.run(SMS).await.unwrap();
        let [Action::Hold { secs }] = actions(&out)[..] else {
            panic!("{answer:?}: {:?}", out.records)
        };
        assert!((min..=max).contains(&secs), "{answer:?}: held {secs}s");
        assert_eq!(
            w.record(&msg.delivery_key).await.unwrap().attempt_count(),
            0
        );
    }
}

#[tokio::test]
async fn transient_spends_an_attempt_then_dies_with_evidence_when_exhausted() {
    let cfg = ConsumerConfig {
        policy: RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::Schedule {
                schedule_secs: vec![0, 10, 20],
            },
            ..RetryPolicy::default()
        },
        ..test_config()
    };
    let w = Mem::new(cfg, true);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    w.provider.script_for(
        &msg.delivery_key,
        [Answer::Transient, Answer::Transient, Answer::Transient],
    );
    w.enqueue(&msg).await;
    let first = w.run(SMS).await.unwrap();
    assert_eq!(actions(&first), [Action::Hold { secs: 10 }]);
    assert_eq!(first.metrics.get(SMS).retried, 1);
    assert_eq!(
        w.record(&msg.delivery_key).await.unwrap().attempt_count(),
        1
    );
    w.advance(10);
    assert_eq!(
        actions(&w.run(SMS).await.unwrap()),
        [Action::Hold { secs: 20 }]
    );
    w.advance(20);
    let last = w.run(SMS).await.unwrap();
    assert_eq!(actions(&last), [Action::Ack]);
    assert_eq!(
        last.metrics.get(SMS).dead[&DeadReason::AttemptsExhausted],
        1
    );
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!((rec.status(), rec.attempt_count()), (Status::Dead, 3));
    let dead = w.dead_letters(SMS).await;
    assert_eq!(dead.len(), 1);
    let (body, letter) = &dead[0];
    assert_eq!(body, &msg.encode(), "the original body");
    assert_eq!(letter.reason, DeadReason::AttemptsExhausted);
    let ev = letter.evidence.as_ref().unwrap();
    assert_eq!(ev.attempts, 3);
    assert_eq!(ev.last_error.as_deref(), Some("http_503"));
    assert_eq!(ev.source_queue, "app-sms");
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 3);
}

#[tokio::test]
async fn permanent_goes_straight_to_the_dlq() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    w.provider
        .script_for(&msg.delivery_key, [Answer::Permanent]);
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Ack]);
    assert_eq!(out.metrics.get(SMS).dead[&DeadReason::Rejected], 1);
    let dead = w.dead_letters(SMS).await;
    assert_eq!(dead[0].1.reason, DeadReason::Rejected);
    assert_eq!(dead[0].1.evidence.as_ref().unwrap().attempts, 1);
}

#[tokio::test]
async fn expired_and_cancelled_reminders_never_reach_the_provider() {
    let w = Mem::new(test_config(), true);
    let stale = w.reminder("stale", &[SMS]).await;
    let cancelled = w.reminder("cancelled", &[SMS]).await;
    w.store
        .mark(&cancelled.reminder_id, 1, ReminderStatus::Cancelled)
        .await
        .unwrap();
    w.enqueue(&message(&cancelled, SMS)).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(out.metrics.get(SMS).cancelled, 1);
    // Stale by every clock within the margin (docs/design.md, "Clock margin").
    w.advance(3601 + CLOCK_MARGIN.as_secs());
    w.enqueue(&message(&stale, SMS)).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Ack]);
    assert_eq!(out.metrics.get(SMS).expired, 1);
    assert_eq!(w.provider.total_calls(), 0);
    let key = message(&stale, SMS).delivery_key;
    assert_eq!(w.record(&key).await.unwrap().status(), Status::Expired);
    let key = message(&cancelled, SMS).delivery_key;
    assert_eq!(w.record(&key).await.unwrap().status(), Status::Cancelled);
}

#[tokio::test]
async fn an_edited_reminder_sends_its_current_version() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    let mut edited = r.clone();
    edited.payload_version = 2;
    edited.content = reminders::domain::Content::Text {
        subject: "Pickup moved".into(),
        body: "6pm".into(),
    };
    w.store
        .replace(&edited, 1, ReminderStatus::Scheduled)
        .await
        .unwrap();
    w.enqueue(&msg).await;
    w.run(SMS).await.unwrap();
    assert_eq!(w.provider.versions_for(&msg.delivery_key), [2]);
}

#[tokio::test]
async fn unknown_reminders_die_with_their_reason() {
    let w = Mem::new(test_config(), true);
    let ghost = crate::harness::reminder("ghost", &[SMS]);
    w.enqueue(&message(&ghost, SMS)).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Ack]);
    assert_eq!(
        w.dead_letters(SMS).await[0].1.reason,
        DeadReason::UnknownReminder
    );
    let rec = w.record(&message(&ghost, SMS).delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::UnknownReminder));
}

#[tokio::test]
async fn one_malformed_record_in_ten_affects_only_itself() {
    let w = Mem::new(test_config(), true);
    for i in 0..9 {
        let r = w.reminder(&format!("r{i}"), &[SMS]).await;
        w.enqueue(&message(&r, SMS)).await;
    }
    w.enqueue_raw(SMS, "{not json").await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(out.records.len(), 10);
    assert!(
        out.response.batch_item_failures.is_empty(),
        "schema is acked, not retried"
    );
    let m = out.metrics.get(SMS);
    assert_eq!((m.delivered, m.dead[&DeadReason::Schema]), (9, 1));
    let dead = w.dead_letters(SMS).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].0, "{not json");
    assert_eq!(
        dead[0].1.evidence.as_ref().unwrap().last_error.as_deref(),
        Some("malformed_message")
    );
}

#[tokio::test]
async fn unknown_versions_and_foreign_channels_are_schema_errors() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS, Channel::Email]).await;
    w.enqueue_raw(SMS, r#"{"v":9,"anything":true}"#).await;
    let email_msg = message(&r, Channel::Email);
    w.enqueue_raw(SMS, &email_msg.encode()).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(out.metrics.get(SMS).dead[&DeadReason::Schema], 2);
    assert_eq!(w.provider.total_calls(), 0);
}

#[tokio::test]
async fn a_panic_fails_its_record_only() {
    let w = Mem::new(test_config(), true);
    let bad = w.reminder("bad", &[SMS]).await;
    let good = w.reminder("good", &[SMS]).await;
    w.provider
        .script_for(&message(&bad, SMS).delivery_key, [Answer::Panic]);
    w.enqueue(&message(&bad, SMS)).await;
    w.enqueue(&message(&good, SMS)).await;
    let out = w.run(SMS).await.unwrap();
    let m = out.metrics.get(SMS);
    assert_eq!((m.delivered, m.panics), (1, 1));
    assert_eq!(out.response.batch_item_failures.len(), 1);
}

#[tokio::test]
async fn an_infrastructure_error_fails_its_record_only() {
    let w = Mem::new(test_config(), true);
    for i in 0..3 {
        let r = w.reminder(&format!("r{i}"), &[SMS]).await;
        w.enqueue(&message(&r, SMS)).await;
    }
    w.store_faults.fail(OP_GET, FaultPoint::Before, 1);
    let out = w.run(SMS).await.unwrap();
    let m = out.metrics.get(SMS);
    assert_eq!((m.delivered, m.infra_errors), (2, 1));
    assert_eq!(out.response.batch_item_failures.len(), 1);
    // It comes back after the queue's visibility timeout and goes through.
    w.advance(181);
    assert_eq!(w.run(SMS).await.unwrap().metrics.get(SMS).delivered, 1);
}

/// Crash after the provider accepted, before the outcome write: the redelivery resolves by
/// the ambiguous rule, never by a silent second send.
#[tokio::test]
async fn lost_outcome_write_resolves_by_the_ambiguous_rule() {
    for idempotent in [true, false] {
        let w = Mem::new(test_config(), idempotent);
        let r = w.reminder("r1", &[SMS]).await;
        let msg = message(&r, SMS);
        w.enqueue(&msg).await;
        // Put #1 is the claim; put #2, the outcome, fails.
        w.ledger_faults.fail_after(OP_PUT, FaultPoint::Before, 1, 1);
        let out = w.run(SMS).await.unwrap();
        assert_eq!(actions(&out), [Action::Retry]);
        assert_eq!(w.provider.sends_for(&msg.delivery_key), 1);
        w.advance(181);
        let mut again = w.run(SMS).await.unwrap();
        if idempotent {
            // The abandoned attempt is spent and the policy's backoff holds before the resend.
            let [Action::Hold { secs }] = actions(&again)[..] else {
                panic!("{:?}", actions(&again))
            };
            assert_eq!(
                w.provider.calls_for(&msg.delivery_key),
                1,
                "not before the backoff"
            );
            w.advance(u64::from(secs) + 1);
            again = w.run(SMS).await.unwrap();
        }
        assert_eq!(actions(&again), [Action::Ack]);
        let rec = w.record(&msg.delivery_key).await.unwrap();
        if idempotent {
            assert_eq!(rec.status(), Status::Delivered);
            assert_eq!(w.provider.calls_for(&msg.delivery_key), 2);
            // Both calls were accepted, under one idempotency key: the provider's
            // deduplication is what keeps the recipient's count at one.
            assert_eq!(
                w.provider.acceptances_for(&msg.delivery_key),
                2,
                "resent with the same key"
            );
            assert_eq!(rec.attempt_count(), 2, "the lost attempt counts");
        } else {
            assert_eq!(rec.status(), Status::Dead);
            assert_eq!(rec.dead_reason(), Some(DeadReason::Ambiguous));
            assert_eq!(w.provider.calls_for(&msg.delivery_key), 1, "never resent");
            assert_eq!(w.dead_letters(SMS).await[0].1.reason, DeadReason::Ambiguous);
        }
    }
}

/// A message seen again while another worker's lease is live waits for the lease to end.
#[tokio::test]
async fn a_live_lease_defers_a_duplicate_until_it_ends() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    w.ledger_faults.fail_after(OP_PUT, FaultPoint::Before, 1, 1);
    w.run(SMS).await.unwrap();
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    let [Action::Hold { secs }] = actions(&out)[..] else {
        panic!("{:?}", out.records)
    };
    assert!(
        (60..=62).contains(&secs),
        "waits out the 60 s lease: {secs}"
    );
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 1);
}

#[tokio::test]
async fn a_long_throttle_never_reaches_the_dlq_through_max_receive_count() {
    let cfg = ConsumerConfig {
        max_receive_count: 10,
        reenqueue_margin: 3,
        policy: RetryPolicy {
            max_throttle_deferrals: 1_000,
            ..RetryPolicy::default()
        },
        ..test_config()
    };
    let w = Mem::with_redrive(cfg, true, 10);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    w.provider.script_for(
        &msg.delivery_key,
        std::iter::repeat_n(Answer::ThrottleSecs(5), 40),
    );
    w.enqueue(&msg).await;
    let mut reenqueued = 0;
    for _ in 0..40 {
        w.advance(7);
        if let Some(out) = w.run(SMS).await {
            reenqueued += out.metrics.get(SMS).reenqueued;
        }
    }
    assert!(
        w.dead_letters(SMS).await.is_empty(),
        "nothing reached the DLQ"
    );
    assert!(
        reenqueued >= 3,
        "fresh copies replaced worn-out ones: {reenqueued}"
    );
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Deferred);
    assert!(rec.throttle_count() > 10, "{}", rec.throttle_count());
    assert_eq!(rec.attempt_count(), 0);
}

#[tokio::test]
async fn waits_longer_than_visibility_allows_become_a_delayed_copy() {
    let cfg = ConsumerConfig {
        policy: RetryPolicy {
            backoff: Backoff::Schedule {
                schedule_secs: vec![0, 13 * 3600],
            },
            ..RetryPolicy::default()
        },
        ..test_config()
    };
    let w = Mem::new(cfg, true);
    let mut r = crate::harness::reminder("r1", &[SMS]);
    r.fresh_until = T0.plus(Duration::from_secs(48 * 3600));
    w.store.insert(&r).await.unwrap();
    let msg = message(&r, SMS);
    w.provider
        .script_for(&msg.delivery_key, [Answer::Transient]);
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Reenqueued]);
    // The copy carries not_before, and the consumer keeps re-deferring until then.
    w.advance(901);
    let held = w.run(SMS).await.unwrap();
    assert!(matches!(
        actions(&held)[..],
        [Action::Reenqueued] | [Action::Hold { .. }]
    ));
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 1);
    w.advance(13 * 3600);
    w.run_until_idle(SMS, 1, 100).await;
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 2);
    assert_eq!(
        w.record(&msg.delivery_key).await.unwrap().status(),
        Status::Delivered
    );
}

#[tokio::test]
async fn a_batch_that_cannot_finish_releases_the_rest() {
    let cfg = ConsumerConfig {
        initial_concurrency: 4,
        ..test_config()
    };
    let w = Mem::new(cfg.clone(), true);
    for i in 0..10 {
        let r = w.reminder(&format!("r{i}"), &[SMS]).await;
        w.provider.script_for(
            &message(&r, SMS).delivery_key,
            [Answer::SlowDeliver(Duration::from_secs(5))],
        );
        w.enqueue(&message(&r, SMS)).await;
    }
    // Each record needs up to 20 s to claim, send and record (5 s storage calls, a 10 s
    // provider call); on the virtual clock each send here takes 5 s, one after another. Three
    // fit before the deadline; the rest are released unclaimed, and the handler ends in time.
    let deadline = T0.plus(Duration::from_secs(30));
    let out = w.run_with_deadline(SMS, Some(deadline)).await.unwrap();
    let m = out.metrics.get(SMS);
    assert_eq!((m.delivered, m.released), (3, 7));
    assert_eq!(out.response.batch_item_failures.len(), 7);
    assert_eq!(
        w.provider.total_calls(),
        3,
        "released records were never sent"
    );
    assert!(reminders::clock::Clock::now(&w.clock) <= deadline);
    // Released means visible again at once.
    assert_eq!(w.run(SMS).await.unwrap().records.len(), 7);
}

#[tokio::test]
async fn not_before_is_honoured_without_a_claim() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS]).await;
    let mut msg = message(&r, SMS);
    msg.not_before = Some(T0.plus(Duration::from_secs(120)));
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Hold { secs: 120 }]);
    assert!(w.record(&msg.delivery_key).await.is_none());
    assert_eq!(w.provider.total_calls(), 0);
}

/// The provider accepted but the answer was lost (a timeout after the request was written).
#[tokio::test]
async fn accepted_then_lost_follows_the_ambiguous_rule() {
    for idempotent in [true, false] {
        let w = Mem::new(test_config(), idempotent);
        let r = w.reminder("r1", &[SMS]).await;
        let msg = message(&r, SMS);
        w.provider
            .script_for(&msg.delivery_key, [Answer::AcceptedThenLost]);
        w.enqueue(&msg).await;
        let out = w.run(SMS).await.unwrap();
        if idempotent {
            assert!(
                matches!(actions(&out)[..], [Action::Hold { .. }]),
                "{:?}",
                out.records
            );
            for _ in 0..60 {
                if w.record(&msg.delivery_key).await.unwrap().status() == Status::Delivered {
                    break;
                }
                w.advance(60);
                w.run(SMS).await;
            }
            let status = w.record(&msg.delivery_key).await.unwrap().status();
            assert_eq!(status, Status::Delivered, "delivered within an hour");
            assert_eq!(w.provider.calls_for(&msg.delivery_key), 2);
        } else {
            assert_eq!(actions(&out), [Action::Ack]);
            assert_eq!(out.metrics.get(SMS).dead[&DeadReason::Ambiguous], 1);
            assert_eq!(w.provider.calls_for(&msg.delivery_key), 1);
        }
        // Idempotent: accepted twice under one key (the provider shows it once); otherwise
        // accepted once and never resent.
        let expected = if idempotent { 2 } else { 1 };
        assert_eq!(
            w.provider.acceptances_for(&msg.delivery_key),
            expected,
            "idempotent={idempotent}"
        );
    }
}

#[tokio::test]
async fn throttles_past_the_budget_die_as_throttle_exhausted() {
    let cfg = ConsumerConfig {
        policy: RetryPolicy {
            max_throttle_deferrals: 2,
            ..RetryPolicy::default()
        },
        ..test_config()
    };
    let w = Mem::new(cfg, true);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    w.provider.script_for(
        &msg.delivery_key,
        std::iter::repeat_n(Answer::ThrottleSecs(1), 3),
    );
    w.enqueue(&msg).await;
    for _ in 0..6 {
        w.run(SMS).await;
        w.advance(3);
    }
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::ThrottleExhausted));
    assert_eq!((rec.attempt_count(), rec.throttle_count()), (0, 2));
    assert_eq!(
        w.dead_letters(SMS).await[0].1.reason,
        DeadReason::ThrottleExhausted
    );
}

/// No chance left before `fresh_until`: no further call, and the delivery waits out its
/// freshness before it ends expired (it is never called expired while still fresh).
#[tokio::test]
async fn a_retry_that_would_land_after_fresh_until_expires_instead() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    w.provider
        .script_for(&msg.delivery_key, [Answer::ThrottleSecs(7200)]);
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    // Held until the provider allows (past freshness, so no call is made then either).
    assert_eq!(actions(&out), [Action::Hold { secs: 7200 }]);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Deferred);
    assert_eq!(
        rec.next_eligible_at(),
        Some(T0.plus(Duration::from_secs(7200)))
    );
    w.advance(7200);
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Ack]);
    assert_eq!(out.metrics.get(SMS).expired, 1);
    assert_eq!(
        w.record(&msg.delivery_key).await.unwrap().status(),
        Status::Expired
    );
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 1);
}

/// A worker claimed and vanished; by the time the message returns the reminder is stale. The
/// delivery is never acked as "sending": it dies as ambiguous, with evidence.
#[tokio::test]
async fn an_abandoned_claim_on_a_stale_reminder_dies_ambiguous() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    w.ledger_faults.fail_after(OP_PUT, FaultPoint::Before, 1, 1);
    assert_eq!(actions(&w.run(SMS).await.unwrap()), [Action::Retry]);
    w.advance(3601 + CLOCK_MARGIN.as_secs());
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Ack]);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::Ambiguous));
    assert_eq!(w.dead_letters(SMS).await[0].1.reason, DeadReason::Ambiguous);
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 1);
}

#[tokio::test]
async fn a_due_time_edited_later_after_enqueue_is_waited_for() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("r1", &[SMS]).await;
    let msg = message(&r, SMS);
    let mut later = r.clone();
    later.due_at = T0.plus(Duration::from_secs(600));
    later.payload_version = 2;
    later.status = ReminderStatus::Enqueued;
    w.store
        .mark(&r.reminder_id, 1, ReminderStatus::Enqueued)
        .await
        .unwrap();
    w.store
        .replace(&later, 1, ReminderStatus::Enqueued)
        .await
        .unwrap();
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Hold { secs: 600 }]);
    assert_eq!(w.provider.total_calls(), 0);
    w.advance(600);
    w.run(SMS).await.unwrap();
    assert_eq!(w.provider.versions_for(&msg.delivery_key), [2]);
}

/// A wait that would end past freshness (a `not_before` beyond `fresh_until`) is never
/// re-enqueued forever, nor called expired while still fresh: it waits out the freshness,
/// then expires, unsent.
#[tokio::test]
async fn a_not_before_past_freshness_expires() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("late-wait", &[SMS]).await;
    let mut msg = message(&r, SMS);
    msg.not_before = Some(r.fresh_until.plus(Duration::from_secs(3600)));
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    // Until every clock within the margin calls it stale (docs/design.md, "Clock margin"), in whole
    // seconds.
    let left = surely_stale_at(r.fresh_until)
        .since(T0)
        .as_millis()
        .div_ceil(1000) as u64;
    assert_eq!(out.records[0].action, Action::Hold { secs: left as u32 });
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 0);
    w.advance(left);
    let out = w.run(SMS).await.unwrap();
    assert_eq!(out.records[0].action, Action::Ack);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Expired);
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 0);
    assert!(w.queue.is_empty(SMS), "no copy re-enqueued");
    // A not_before inside freshness is still waited for (a world of its own, at T0).
    let w = Mem::new(test_config(), true);
    let r2 = w.reminder("short-wait", &[SMS]).await;
    let mut msg2 = message(&r2, SMS);
    msg2.not_before = Some(T0.plus(Duration::from_secs(600)));
    w.enqueue(&msg2).await;
    let out = w.run(SMS).await.unwrap();
    assert!(matches!(
        out.records[0].action,
        Action::Hold { .. } | Action::Reenqueued
    ));
    assert!(w.record(&msg2.delivery_key).await.is_none());
}

/// A reminder the scheduler quarantined (or whose item is unreadable: see the emulator's
/// poison test) is dead at once as `invalid_reminder` (not an
/// infrastructure error retried for hours), with the field in the evidence.
#[tokio::test]
async fn an_unreadable_reminder_is_dead_at_once_not_an_outage() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("quarantined", &[SMS]).await;
    let marked = w.store.quarantine("quarantined", "channels: empty").await;
    assert_eq!(marked.unwrap(), reminders::ports::Marked::Marked);
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(out.records[0].action, Action::Ack);
    let m = out.metrics.get(SMS);
    assert_eq!((m.infra_errors, m.dead_total()), (0, 1));
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::InvalidReminder));
    let letters = w.dead_letters(SMS).await;
    let evidence = letters[0].1.evidence.clone().unwrap();
    assert!(evidence.last_error.unwrap().contains("channels"));
}

/// A claim applied but answered with an error (a timeout after DynamoDB took the write) is
/// recognised as ours by one read, and the send goes ahead: with a provider that ignores
/// idempotency keys it must not die later as `ambiguous` when nothing was sent.
#[tokio::test]
async fn a_claim_applied_late_is_still_ours() {
    let w = Mem::new(test_config(), false);
    let r = w.reminder("late-claim", &[SMS]).await;
    let msg = message(&r, SMS);
    w.ledger_faults.fail(OP_PUT, FaultPoint::After, 1);
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(out.records[0].action, Action::Ack);
    let m = out.metrics.get(SMS);
    assert_eq!((m.delivered, m.infra_errors), (1, 0));
    assert_eq!(w.provider.acceptances_for(&msg.delivery_key), 1);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Delivered);
}

/// The outcome write applied but answered with an error: one read shows it was ours, and the
/// message is acked at once instead of coming back as a duplicate.
#[tokio::test]
async fn an_outcome_write_applied_late_is_still_ours() {
    let w = Mem::new(test_config(), false);
    let r = w.reminder("late-outcome", &[SMS]).await;
    let msg = message(&r, SMS);
    w.ledger_faults.fail_after(OP_PUT, FaultPoint::After, 1, 1);
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(out.records[0].action, Action::Ack);
    assert_eq!(out.metrics.get(SMS).infra_errors, 0);
    assert_eq!(
        w.record(&msg.delivery_key).await.unwrap().status(),
        Status::Delivered
    );
    assert!(w.queue.is_empty(SMS), "nothing comes back");
}

/// A schema failure whose body is near SQS's 256 KiB: the DLQ copy keeps the head of the body
/// and says it was truncated, instead of being refused and looping to
/// `receive_count_exceeded`.
#[tokio::test]
async fn a_huge_undecodable_body_is_dead_lettered_truncated() {
    let w = Mem::new(test_config(), true);
    let body = format!("{{\"v\":1,\"junk\":\"{}\"}}", "x".repeat(262_000));
    w.enqueue_raw(SMS, &body).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(out.records[0].action, Action::Ack);
    let letters = w.dead_letters(SMS).await;
    assert_eq!(letters.len(), 1);
    let (copy, letter) = &letters[0];
    assert_eq!(letter.reason, DeadReason::Schema);
    assert!(body.starts_with(copy.as_str()) && copy.len() < body.len());
    let error = letter
        .evidence
        .as_ref()
        .unwrap()
        .last_error
        .clone()
        .unwrap();
    assert!(error.contains("truncated from"), "{error}");
}

/// A dead delivery has exactly one DLQ copy: messages that arrive for it later (duplicates, a
/// crash-looped copy) add none, and the copy states when it died.
#[tokio::test]
async fn a_dead_delivery_is_copied_to_the_dlq_once() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("dies-once", &[SMS]).await;
    let msg = message(&r, SMS);
    w.provider
        .script_for(&msg.delivery_key, [Answer::Permanent]);
    w.enqueue(&msg).await;
    w.run(SMS).await.unwrap();
    let died_at = reminders::clock::Clock::now(&w.clock);
    for _ in 0..3 {
        w.advance(60);
        w.enqueue(&msg).await;
        assert_eq!(w.run(SMS).await.unwrap().records[0].action, Action::Ack);
    }
    let letters = w.dead_letters(SMS).await;
    assert_eq!(letters.len(), 1, "one copy per death");
    let evidence = letters[0].1.evidence.clone().unwrap();
    assert_eq!(evidence.dead_at, died_at);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.dlq_copied_at(), Some(died_at));
}

/// Freshness is checked again right before the send: a claim that took long enough for the
/// reminder to go stale ends as expired under its own lease, and nothing is sent.
#[tokio::test]
async fn a_reminder_gone_stale_during_its_claim_is_not_sent() {
    use reminders::clock::Clock;
    use reminders::ports::{MemoryLedger, MemoryQueue};
    use reminders_harness::around::{Around, Latency};
    use reminders_harness::ManualClock;
    use reminders_harness::ScriptedProvider;
    let r = crate::harness::reminder("stale-in-claim", &[SMS]);
    // Fresh by every clock within the margin when read, stale by every one after the claim.
    let clock = ManualClock::at(
        r.fresh_until
            .minus(CLOCK_MARGIN + Duration::from_millis(100)),
    );
    let ledger = Arc::new(MemoryLedger::default());
    let provider = Arc::new(ScriptedProvider::new(clock.clone(), true));
    // The claim's write takes twice the margin and 200 ms: the reminder goes stale while it
    // is in flight.
    let slowed = Around::new(
        ledger.clone(),
        Latency {
            clock: clock.clone(),
            latency: CLOCK_MARGIN * 2 + Duration::from_millis(200),
        },
    );
    let dlq = Arc::new(MemoryQueue::new(clock.clone()));
    let ports = (slowed, dlq, provider.clone());
    let w = crate::harness::Custom::new(&clock, &r, ports, test_config()).await;
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    let out = w.poll(SMS, 30).await;
    assert_eq!(out.records[0].action, Action::Ack);
    assert!(clock.now() > r.fresh_until, "the claim crossed fresh_until");
    assert_eq!(
        provider.calls_for(&msg.delivery_key),
        0,
        "nothing sent stale"
    );
    let rec = reminders::ports::Ledger::get(&*ledger, &msg.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status(), Status::Expired);
}

/// A send abandoned by its worker is resolved by the policy's decision, not by an immediate
/// takeover: when the next chance would land past freshness and no last chance fits before
/// it, it is not resent, and since the send may have happened it dies as `ambiguous` (not
/// `expired`, which means never sent).
#[tokio::test]
async fn an_abandoned_send_whose_retry_lands_past_freshness_dies_ambiguous() {
    let mut cfg = test_config();
    cfg.policy.backoff = Backoff::Schedule {
        schedule_secs: vec![0, 7_200],
    };
    let w = Mem::new(cfg, true);
    let r = w.reminder("abandoned-late", &[SMS]).await;
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    // The claim goes through, the send is accepted, the outcome write fails.
    w.ledger_faults.fail_after(OP_PUT, FaultPoint::Before, 1, 1);
    let sent_at = reminders::clock::Clock::now(&w.clock);
    assert_eq!(actions(&w.run(SMS).await.unwrap()), [Action::Retry]);
    // Found again 20 s before fresh_until: less than the last chance's margin is left.
    w.advance(r.fresh_until.since(sent_at).as_secs() - 20);
    assert_eq!(actions(&w.run(SMS).await.unwrap()), [Action::Ack]);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::Ambiguous));
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 1, "no resend");
    assert_eq!(w.dead_letters(SMS).await.len(), 1);
}

/// A delivery waiting out a backoff whose reminder becomes unreadable dies at once as
/// `invalid_reminder`, with its copy: the unfenced death applies to the item as it now is.
#[tokio::test]
async fn a_deferred_delivery_whose_reminder_turns_invalid_dies() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("turns-invalid", &[SMS]).await;
    let msg = message(&r, SMS);
    w.provider
        .script_for(&msg.delivery_key, [Answer::Transient]);
    w.enqueue(&msg).await;
    w.run(SMS).await.unwrap();
    assert_eq!(
        w.record(&msg.delivery_key).await.unwrap().status(),
        Status::Deferred
    );
    let marked = w
        .store
        .quarantine("turns-invalid", "content.kind: unknown")
        .await;
    assert_eq!(marked.unwrap(), reminders::ports::Marked::Marked);
    w.advance(3_600 - 1);
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Ack]);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::InvalidReminder));
    let letters = w.dead_letters(SMS).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].1.evidence.as_ref().unwrap().attempts, 1);
}

/// A claim slowed past most of its lease gives the delivery back unsent instead of sending
/// with too little lease left (another worker would take over mid-send).
#[tokio::test]
async fn a_claim_that_used_up_its_lease_sends_nothing() {
    use reminders::ports::{MemoryLedger, MemoryQueue};
    use reminders_harness::around::{Around, Latency};
    use reminders_harness::ManualClock;
    use reminders_harness::ScriptedProvider;
    let r = crate::harness::reminder("slow-claim", &[SMS]);
    let clock = ManualClock::at(T0);
    let ledger = Arc::new(MemoryLedger::default());
    let provider = Arc::new(ScriptedProvider::new(clock.clone(), false));
    let cfg = test_config();
    // The claim's write takes most of the lease.
    let latency = cfg.lease - cfg.provider_timeout / 2;
    let slowed = Around::new(
        ledger.clone(),
        Latency {
            clock: clock.clone(),
            latency,
        },
    );
    let dlq = Arc::new(MemoryQueue::new(clock.clone()));
    let w = crate::harness::Custom::new(&clock, &r, (slowed, dlq, provider.clone()), cfg).await;
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    let out = w.poll(SMS, 30).await;
    assert!(matches!(out.records[0].action, Action::Hold { .. }));
    assert_eq!(provider.calls_for(&msg.delivery_key), 0, "nothing sent");
    let rec = reminders::ports::Ledger::get(&*ledger, &msg.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((rec.status(), rec.attempt_count()), (Status::Ready, 0));
}

/// A lease that must cover the send: a claim that leaves the lease just longer than a provider
/// call, but not a provider call and the outcome's write, gives the delivery back: the outcome
/// could land after the lease. The rule is the one cold start checks (`lease_covers_send`).
#[tokio::test]
async fn a_lease_that_cannot_cover_the_outcome_write_sends_nothing() {
    use reminders::ports::{MemoryLedger, MemoryQueue};
    use reminders_harness::around::{Around, Latency};
    use reminders_harness::ManualClock;
    use reminders_harness::ScriptedProvider;
    let r = crate::harness::reminder("short-lease", &[SMS]);
    let clock = ManualClock::at(T0);
    let ledger = Arc::new(MemoryLedger::default());
    let provider = Arc::new(ScriptedProvider::new(clock.clone(), false));
    let cfg = test_config();
    // Left after the claim: the provider's timeout and one second, less than a storage call.
    let latency = cfg.lease - cfg.provider_timeout - Duration::from_secs(1);
    assert!(!cfg.lease_covers_send(cfg.lease - latency));
    let slowed = Around::new(
        ledger.clone(),
        Latency {
            clock: clock.clone(),
            latency,
        },
    );
    let dlq = Arc::new(MemoryQueue::new(clock.clone()));
    let w = crate::harness::Custom::new(&clock, &r, (slowed, dlq, provider.clone()), cfg).await;
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    let out = w.poll(SMS, 30).await;
    assert!(matches!(out.records[0].action, Action::Hold { .. }));
    assert_eq!(provider.calls_for(&msg.delivery_key), 0, "nothing sent");
}

/// A provider whose send outlives the lease: while it is in flight, a duplicate of the
/// message finds the lease lapsed and — the provider ignoring idempotency keys — kills the
/// delivery as `ambiguous`. Then the send comes back accepted.
struct OutlivesItsLease {
    clock: reminders_harness::ManualClock,
    ledger: Arc<reminders::ports::MemoryLedger>,
    calls: std::sync::atomic::AtomicU32,
}

impl reminders::ports::Provider for OutlivesItsLease {
    fn honours_idempotency_key(&self) -> bool {
        false
    }
    fn partition(&self, channel: reminders::domain::Channel) -> reminders::ports::GatePartition {
        reminders::ports::GatePartition::new(channel, "slow")
    }
    async fn send(&self, request: &reminders::ports::SendRequest) -> reminders::policy::Outcome {
        use reminders::ledger::{Change, Ctx};
        use reminders::ports::Ledger;
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        reminders::clock::Clock::sleep(&self.clock, Duration::from_secs(61)).await;
        let held = self
            .ledger
            .get(&request.delivery_key)
            .await
            .unwrap()
            .unwrap();
        let ctx = Ctx {
            key: request.delivery_key.clone(),
            now: reminders::clock::Clock::now(&self.clock),
            expires_at: held.expires_at(),
            origin: None,
        };
        let die = Change::Die {
            token: held.lease_token().cloned(),
            reason: DeadReason::Ambiguous,
            spends_attempt: true,
            error: Some("lease_expired_without_outcome".into()),
            fallback_to: None,
            maybe_sent: false,
        };
        reminders::delivery::transition(&*self.ledger, Some(held), die, &ctx)
            .await
            .unwrap();
        reminders::policy::Outcome::Delivered {
            receipt: Some("late-receipt".into()),
        }
    }
}

/// A late success is reconciled: the lease holder whose send outlived its lease, finding the
/// delivery dead as ambiguous, moves it to delivered (fenced by its lapsed lease) and says so.
#[tokio::test]
async fn a_send_that_outlived_its_lease_is_reconciled_as_delivered() {
    use reminders::ports::{MemoryLedger, MemoryQueue};
    use reminders_harness::ManualClock;
    let r = crate::harness::reminder("late-success", &[SMS]);
    let clock = ManualClock::at(T0);
    let ledger = Arc::new(MemoryLedger::default());
    let provider = Arc::new(OutlivesItsLease {
        clock: clock.clone(),
        ledger: ledger.clone(),
        calls: Default::default(),
    });
    let dlq = Arc::new(MemoryQueue::new(clock.clone()));
    let ports = (ledger.clone(), dlq, provider);
    let w = crate::harness::Custom::new(&clock, &r, ports, test_config()).await;
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    let out = w.poll(SMS, 300).await;
    assert_eq!(out.records[0].action, Action::Ack);
    let m = out.metrics.get(SMS);
    assert_eq!((m.delivered, m.delivered_after_takeover), (1, 1));
    let rec = reminders::ports::Ledger::get(&*ledger, &msg.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status(), Status::Delivered);
    assert_eq!(rec.provider_receipt(), Some("late-receipt"));
    let (_, last) = *rec.history().last().unwrap();
    assert_eq!((last.from, last.to), (Status::Dead, Status::Delivered));
}

/// A hook on a DLQ by which its send yields to other tasks first: two records for one dead
/// delivery interleave exactly between "no copy recorded" and "copy made".
struct YieldingDlq;

impl reminders_harness::around::Hook for YieldingDlq {
    async fn before(
        &self,
        call: &reminders_harness::around::Call<'_>,
    ) -> Result<(), reminders::ports::PortError> {
        if let reminders_harness::around::Call::DeadLetter { .. } = call {
            tokio::task::yield_now().await;
        }
        Ok(())
    }
}

/// Two records for one delivery that died meanwhile, handled at once: still one DLQ copy.
#[tokio::test]
async fn two_records_for_a_dead_delivery_at_once_copy_it_once() {
    use reminders::ledger::{Change, Ctx, LeaseToken};
    use reminders::ports::{MemoryLedger, MemoryQueue};
    use reminders_harness::ManualClock;
    use reminders_harness::ScriptedProvider;
    let r = crate::harness::reminder("dead-twice", &[SMS]);
    let clock = ManualClock::at(T0);
    let ledger = Arc::new(MemoryLedger::default());
    let dlq = Arc::new(MemoryQueue::new(clock.clone()));
    let provider = Arc::new(ScriptedProvider::new(clock.clone(), true));
    let yielding = reminders_harness::around::Around::new(dlq.clone(), YieldingDlq);
    let ports = (ledger.clone(), yielding, provider);
    let w = crate::harness::Custom::new(&clock, &r, ports, test_config()).await;
    let (consumer, queue, urls) = (
        w.consumer.clone(),
        w.queue.clone(),
        crate::harness::queue_urls(),
    );
    // Dead in the ledger (as if its worker crashed before the copy).
    let msg = message(&r, SMS);
    let ctx = Ctx {
        key: msg.delivery_key.clone(),
        now: T0,
        expires_at: r.expires_at,
        origin: None,
    };
    let token = LeaseToken::generate(&mut rand::rng());
    let claim = reminders::delivery::ClaimRequest {
        token: token.clone(),
        lease_expires_at: T0.plus(Duration::from_secs(60)),
        payload_version: 1,
        policy: reminders::policy::RetryPolicy::default(),
    };
    let reminders::delivery::Claim::Acquired(held) =
        reminders::delivery::claim(&*ledger, claim, &ctx)
            .await
            .unwrap()
    else {
        panic!("claim")
    };
    let die = Change::Die {
        token: Some(token),
        reason: DeadReason::Rejected,
        spends_attempt: true,
        error: Some("http_400".into()),
        fallback_to: None,
        maybe_sent: false,
    };
    reminders::delivery::transition(&*ledger, Some(held), die, &ctx)
        .await
        .unwrap();
    for _ in 0..2 {
        w.enqueue(&msg).await;
    }
    let mapping = Mapping::new(&urls, SMS, 1, 60);
    let a = mapping.receive(&queue).await.unwrap().expect("one").event;
    let b = mapping
        .receive(&queue)
        .await
        .unwrap()
        .expect("the other")
        .event;
    let (ca, cb) = (consumer.clone(), consumer.clone());
    let ta = tokio::spawn(async move { ca.handle(a, None).await });
    let tb = tokio::spawn(async move { cb.handle(b, None).await });
    let (ra, rb) = (ta.await.unwrap(), tb.await.unwrap());
    assert_eq!(ra.records[0].action, Action::Ack);
    assert!(matches!(
        rb.records[0].action,
        Action::Ack | Action::Hold { .. }
    ));
    assert_eq!(dlq.len(SMS), 1, "one copy per death");
}

/// Fitting the deadline: a record that passed the start check still has to fit its claim, send
/// and outcome before the invocation's deadline. With slow storage and a slow provider it would
/// outlive the deadline (and a Lambda timeout fails the whole batch); it gives the delivery
/// back unsent instead, and the handler returns in time.
#[tokio::test]
async fn a_record_that_cannot_finish_before_the_deadline_sends_nothing() {
    use reminders::clock::Clock;
    use reminders::ports::{MemoryLedger, MemoryQueue};
    use reminders_harness::around::{Around, Latency};
    use reminders_harness::ManualClock;
    use reminders_harness::ScriptedProvider;
    let r = crate::harness::reminder("late-in-invocation", &[SMS]);
    let clock = ManualClock::at(T0);
    let ledger = Arc::new(MemoryLedger::default());
    let provider = Arc::new(ScriptedProvider::new(clock.clone(), true));
    let cfg = test_config();
    // Each ledger call takes 4 s (within the storage timeout); the send would take 9 s.
    let slowed = Around::new(
        ledger.clone(),
        Latency {
            clock: clock.clone(),
            latency: Duration::from_secs(4),
        },
    );
    let dlq = Arc::new(MemoryQueue::new(clock.clone()));
    let w = crate::harness::Custom::new(&clock, &r, (slowed, dlq, provider.clone()), cfg).await;
    let msg = message(&r, SMS);
    provider.script_for(
        &msg.delivery_key,
        [Answer::SlowDeliver(Duration::from_secs(9))],
    );
    w.enqueue(&msg).await;
    // 13 s left: past the start check (12 s), not enough to claim, send and record (before,
    // the record claimed, sent, and wrote its outcome 4 s past the deadline).
    let deadline = T0.plus(Duration::from_secs(13));
    let out = w.poll_by(SMS, 30, Some(deadline)).await;
    assert_eq!(out.records[0].action, Action::Released, "{:?}", out.records);
    assert!(
        clock.now() <= deadline,
        "ran {:?} past the deadline",
        clock.now().since(deadline)
    );
    assert_eq!(provider.calls_for(&msg.delivery_key), 0, "nothing sent");
    let rec = reminders::ports::Ledger::get(&*ledger, &msg.delivery_key).await;
    assert_eq!(rec.unwrap(), None, "not claimed");
    // Released means visible again at once, for an invocation with time to spare.
    let again = w
        .poll_by(SMS, 30, Some(clock.now().plus(Duration::from_secs(60))))
        .await;
    assert_eq!(again.records[0].action, Action::Ack);
    assert_eq!(provider.calls_for(&msg.delivery_key), 1);
}

/// A reminder cancelled by the operator (the ledger first, then the reminder) counts as
/// cancelled when its message is consumed: the metric stayed 0 before, the ledger write being
/// the operator's.
#[tokio::test]
async fn an_operator_cancel_is_counted_when_its_message_is_consumed() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("op-cancel", &[SMS]).await;
    let now = reminders::clock::Clock::now(&w.clock);
    let retention = reminders::domain::Retention::default();
    let report =
        reminders::reminder_writes::cancel(&*w.store, &*w.ledger, &r.reminder_id, now, retention)
            .await
            .unwrap()
            .unwrap();
    assert_eq!(report.deliveries.len(), 1);
    w.enqueue(&message(&r, SMS)).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Ack]);
    assert_eq!(out.metrics.get(SMS).cancelled, 1);
    assert_eq!(w.provider.total_calls(), 0);
}

/// A deferred delivery whose budget is already spent (the policy agreed with the state
/// machine until now, so only a disagreement gets here): the claim is refused by the state
/// machine, and the consumer kills it as `attempts_exhausted` with its copy, never looping and
/// never calling the provider.
#[tokio::test]
async fn a_claim_with_no_attempt_left_dies_instead_of_looping() {
    use reminders::ledger::{apply, Change, Ctx, LeaseToken};
    use reminders::policy::OutcomeClass;
    use reminders::ports::{Expected, Ledger};
    let w = Mem::new(test_config(), true);
    let r = w.reminder("spent", &[SMS]).await;
    let msg = message(&r, SMS);
    let ctx = Ctx {
        key: msg.delivery_key.clone(),
        now: T0,
        expires_at: 2_000_000_000,
        origin: None,
    };
    let token = LeaseToken::generate(&mut rand::rng());
    let policy = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let claim = Change::Claim {
        token: token.clone(),
        lease_expires_at: T0.plus(Duration::from_secs(60)),
        payload_version: 1,
        policy,
    };
    let claimed = apply(None, claim, &ctx).unwrap();
    let defer = Change::Defer {
        token,
        next_eligible_at: T0,
        class: OutcomeClass::Transient,
        error: None,
    };
    let deferred = apply(Some(&claimed), defer, &ctx).unwrap();
    assert_eq!(deferred.attempt_count(), 1);
    w.ledger.put_if(&deferred, Expected::Absent).await.unwrap();
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(actions(&out), [Action::Ack]);
    assert_eq!(w.provider.total_calls(), 0);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.dead_reason(), Some(DeadReason::AttemptsExhausted));
    assert_eq!(w.dead_letters(SMS).await.len(), 1);
}
