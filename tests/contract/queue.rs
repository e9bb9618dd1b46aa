//! DeliveryQueue and DeadLetters contracts: batches, visibility, deletes, delays, receive
//! counts, and the dead-letter format. Both sides run on real time (the in-memory queue on the
//! system clock), and every wait is a bounded poll.

use std::time::Duration;

use reminders::aws::bootstrap::QueueSpec;
use reminders::aws::{SqsDeadLetters, SqsQueues};
use reminders::clock::{SystemClock, Timestamp};
use reminders::deadletter::{DeadLetter, Evidence};
use reminders::domain::{Channel, DeadReason};
use reminders::ports::{
    DeadLetterMessage, DeadLetters, DeliveryQueue, MemoryQueue, OutgoingMessage, ReceivedMessage,
};

use crate::common;

const BOUND: Duration = Duration::from_secs(8);

fn out(id: &str, body: &str, delay_secs: u32) -> OutgoingMessage {
    OutgoingMessage {
        entry_id: id.into(),
        body: body.into(),
        delay_secs,
    }
}

/// Receive until `n` messages arrived or the bound passed.
async fn receive_n<Q: DeliveryQueue>(
    q: &Q,
    ch: Channel,
    n: usize,
    vis: u32,
) -> Vec<ReceivedMessage> {
    let deadline = tokio::time::Instant::now() + BOUND;
    let mut got = Vec::new();
    while got.len() < n && tokio::time::Instant::now() < deadline {
        got.extend(q.receive(ch, 10, vis).await.unwrap());
        if got.len() < n {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    got
}

async fn receive_dead_n<D: DeadLetters>(d: &D, ch: Channel, n: usize) -> Vec<DeadLetterMessage> {
    let deadline = tokio::time::Instant::now() + BOUND;
    let mut got = Vec::new();
    while got.len() < n && tokio::time::Instant::now() < deadline {
        got.extend(d.receive_dead(ch, 10, 30).await.unwrap());
        if got.len() < n {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    got
}

async fn queue_suite<Q: DeliveryQueue>(q: &Q) {
    let ch = Channel::Email;
    let failures = q
        .send_batch(
            ch,
            &[
                out("a", "body-a", 0),
                out("b", "body-b", 0),
                out("c", "body-c", 0),
            ],
        )
        .await
        .unwrap();
    assert!(failures.is_empty());
    let got = receive_n(q, ch, 3, 2).await;
    let mut bodies: Vec<&str> = got.iter().map(|m| m.body.as_str()).collect();
    bodies.sort();
    assert_eq!(bodies, ["body-a", "body-b", "body-c"]);
    assert!(got.iter().all(|m| m.receive_count() == 1));
    assert!(got.iter().all(|m| m.system.contains_key("SentTimestamp")));
    // In flight: not received again; other channels are separate queues.
    assert!(q.receive(ch, 10, 30).await.unwrap().is_empty());
    assert!(q.receive(Channel::Push, 10, 30).await.unwrap().is_empty());

    // Visibility 0 returns a message at once, with its receive count up.
    let a = got.iter().find(|m| m.body == "body-a").unwrap();
    q.change_visibility(ch, &a.receipt_handle, 0).await.unwrap();
    let again = receive_n(q, ch, 1, 30).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].body, "body-a");
    assert_eq!(again[0].receive_count(), 2);

    // Deleted messages never come back, though b and c were received with a 2 s visibility.
    q.delete(ch, &again[0].receipt_handle).await.unwrap();
    for m in got.iter().filter(|m| m.body != "body-a") {
        q.delete(ch, &m.receipt_handle).await.unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < deadline {
        let back = q.receive(ch, 10, 30).await.unwrap();
        assert!(back.is_empty(), "deleted message came back: {back:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Batches follow SQS's rules: at most 10 entries, distinct ids; refusals are final.
    let eleven: Vec<OutgoingMessage> = (0..11).map(|i| out(&format!("e{i}"), "x", 0)).collect();
    let err = q.send_batch(ch, &eleven).await.unwrap_err();
    assert!(!err.is_retryable(), "{err}");
    let twins = [out("same", "x", 0), out("same", "y", 0)];
    let err = q.send_batch(ch, &twins).await.unwrap_err();
    assert!(!err.is_retryable(), "{err}");

    // DelaySeconds hides a message until it is due.
    let sent_at = std::time::Instant::now();
    q.send_batch(Channel::Sms, &[out("d", "delayed", 2)])
        .await
        .unwrap();
    assert!(q.receive(Channel::Sms, 10, 30).await.unwrap().is_empty());
    let delayed = receive_n(q, Channel::Sms, 1, 30).await;
    assert_eq!(delayed.len(), 1, "a delayed message arrives");
    assert!(sent_at.elapsed() >= Duration::from_millis(1_000));
}

fn letter() -> DeadLetter {
    DeadLetter::new(
        DeadReason::AttemptsExhausted,
        Evidence {
            attempts: 5,
            first_seen_at: Some(Timestamp::from_millis(1_000)),
            dead_at: Timestamp::from_millis(2_000),
            last_error: Some("http_503".into()),
            policy_version: Some("v1-default".into()),
            source_queue: "email".into(),
        },
    )
}

async fn dead_letter_suite<D: DeadLetters>(d: &D) {
    let ch = Channel::Email;
    d.dead_letter(ch, r#"{"v":1}"#, &letter()).await.unwrap();
    let got = receive_dead_n(d, ch, 1).await;
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(m.message.body, r#"{"v":1}"#);
    assert_eq!(m.letter, letter());
    assert_eq!(m.message.attributes.len(), 2, "reason and evidence only");
    // Released: visible again; deleted: gone.
    d.release_dead(ch, &m.message.receipt_handle).await.unwrap();
    let again = receive_dead_n(d, ch, 1).await;
    assert_eq!(again.len(), 1);
    d.delete_dead(ch, &again[0].message.receipt_handle)
        .await
        .unwrap();
}

#[tokio::test]
async fn memory_queue_meets_the_contract() {
    queue_suite(&MemoryQueue::new(SystemClock)).await;
    dead_letter_suite(&MemoryQueue::new(SystemClock)).await;
}

/// SQS refuses a message over 256 KiB, body and attributes together; the in-memory DLQ does
/// too, so the consumer's truncation is exercised without AWS. (moto does not enforce the
/// limit, so this side of the contract is pinned in memory only.)
#[tokio::test]
async fn memory_dead_letters_refuse_what_sqs_refuses() {
    let d = MemoryQueue::new(SystemClock);
    let huge = "x".repeat(reminders::ports::queue::MAX_MESSAGE_BYTES);
    let refused = d.dead_letter(Channel::Email, &huge, &letter()).await;
    assert!(
        matches!(refused, Err(ref e) if !e.is_retryable()),
        "{refused:?}"
    );
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn sqs_queues_meet_the_contract() {
    let client = common::sqs().await;
    let (queues, dlqs) = common::channel_queues(&client, QueueSpec::default()).await;
    queue_suite(&SqsQueues::new(client.clone(), queues)).await;
    dead_letter_suite(&SqsDeadLetters::new(client, dlqs)).await;
}

/// A message that crash-loops past maxReceiveCount reaches the DLQ through the queue's own
/// redrive policy, without a reason: it reads as `receive_count_exceeded`.
async fn redrive_policy_suite<Q: DeliveryQueue, D: DeadLetters>(q: &Q, d: &D) {
    q.send_batch(Channel::Push, &[out("x", "crash-loop", 0)])
        .await
        .unwrap();
    let first = receive_n(q, Channel::Push, 1, 0).await;
    assert_eq!(first.len(), 1);
    let deadline = std::time::Instant::now() + BOUND;
    let mut dead = Vec::new();
    while dead.is_empty() && std::time::Instant::now() < deadline {
        // A receive past maxReceiveCount moves the message to the DLQ.
        q.receive(Channel::Push, 10, 0).await.unwrap();
        dead = d.receive_dead(Channel::Push, 10, 30).await.unwrap();
    }
    assert_eq!(dead.len(), 1, "message reaches the DLQ");
    assert_eq!(dead[0].message.body, "crash-loop");
    assert_eq!(dead[0].letter.reason, DeadReason::ReceiveCountExceeded);
    assert_eq!(dead[0].letter.evidence, None);
}

#[tokio::test]
async fn memory_redrive_policy_matches_sqs() {
    let dlq = std::sync::Arc::new(MemoryQueue::new(SystemClock));
    let q = MemoryQueue::new(SystemClock).with_redrive(1, dlq.clone());
    redrive_policy_suite(&q, &dlq).await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn sqs_redrive_policy_reads_as_receive_count_exceeded() {
    let client = common::sqs().await;
    let spec = QueueSpec {
        max_receive_count: 1,
        ..QueueSpec::default()
    };
    let (queues, dlqs) = common::channel_queues(&client, spec).await;
    redrive_policy_suite(
        &SqsQueues::new(client.clone(), queues),
        &SqsDeadLetters::new(client, dlqs),
    )
    .await;
}

/// What a call with a receipt handle older than the message's latest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OldHandle {
    Acted,
    Ignored,
}

/// A message received twice (the first visibility ran out): its first handle is older.
async fn received_twice<Q: DeliveryQueue>(q: &Q, ch: Channel, body: &str) -> (String, String) {
    q.send_batch(ch, &[out("0", body, 0)]).await.unwrap();
    let first = receive_n(q, ch, 1, 1).await;
    assert_eq!(first.len(), 1, "{body}: first receive");
    let second = receive_n(q, ch, 1, 30).await;
    assert_eq!(
        second.len(),
        1,
        "{body}: second receive, after the first visibility"
    );
    assert_eq!(first[0].message_id, second[0].message_id);
    assert_ne!(first[0].receipt_handle, second[0].receipt_handle);
    (
        first[0].receipt_handle.clone(),
        second[0].receipt_handle.clone(),
    )
}

/// Receipt handles: what a delete and a visibility change with an older handle do. SQS documents
/// only that the latest handle is required; the consumer must be safe whichever way it goes, and
/// never use an older handle on a message another worker holds.
async fn old_handle_suite<Q: DeliveryQueue>(q: &Q) -> (OldHandle, OldHandle) {
    let ch = Channel::Push;
    let (old, latest) = received_twice(q, ch, "old-delete").await;
    // A delete with the older handle: an error is as good as nothing.
    let _ = q.delete(ch, &old).await;
    let _ = q.change_visibility(ch, &latest, 0).await;
    let back = receive_n(q, ch, 1, 30).await;
    let delete = if back.is_empty() {
        OldHandle::Acted
    } else {
        q.delete(ch, &back[0].receipt_handle).await.unwrap();
        OldHandle::Ignored
    };
    let (old, _latest) = received_twice(q, ch, "old-visibility").await;
    let _ = q.change_visibility(ch, &old, 0).await;
    let back = q.receive(ch, 10, 30).await.unwrap();
    let visibility = if back.is_empty() {
        OldHandle::Ignored
    } else {
        OldHandle::Acted
    };
    for m in back {
        q.delete(ch, &m.receipt_handle).await.unwrap();
    }
    (delete, visibility)
}

#[tokio::test]
async fn the_memory_queue_has_both_behaviours_of_an_older_handle() {
    use reminders::ports::StaleHandles;
    let ignored = MemoryQueue::new(SystemClock);
    assert_eq!(
        old_handle_suite(&ignored).await,
        (OldHandle::Ignored, OldHandle::Ignored)
    );
    let act = MemoryQueue::new(SystemClock).with_stale_handles(StaleHandles::Act);
    assert_eq!(
        old_handle_suite(&act).await,
        (OldHandle::Acted, OldHandle::Acted)
    );
}

/// The emulator's answer is one of the two the memory queue models, so the chaos worlds,
/// which run both, cover it.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn an_older_handle_on_sqs_is_one_of_the_modelled_behaviours() {
    let client = common::sqs().await;
    let (queues, _) = common::channel_queues(&client, QueueSpec::default()).await;
    let got = old_handle_suite(&SqsQueues::new(client, queues)).await;
    eprintln!(
        "older receipt handle on the emulator: delete {:?}, visibility {:?}",
        got.0, got.1
    );
    assert!(
        [
            (OldHandle::Ignored, OldHandle::Ignored),
            (OldHandle::Acted, OldHandle::Acted)
        ]
        .contains(&got),
        "{got:?}"
    );
}
