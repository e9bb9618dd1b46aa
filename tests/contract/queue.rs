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

use crate::common::{self, poll};

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
    let got = receive_n(q, ch, 3, 30).await;
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

    // Deleted messages never come back.
    q.delete(ch, &again[0].receipt_handle).await.unwrap();
    for m in got.iter().filter(|m| m.body != "body-a") {
        q.delete(ch, &m.receipt_handle).await.unwrap();
    }

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

#[tokio::test]
async fn sqs_queues_meet_the_contract() {
    let client = common::sqs().await;
    let (queues, dlqs) = common::channel_queues(&client, QueueSpec::default()).await;
    queue_suite(&SqsQueues::new(client.clone(), queues)).await;
    dead_letter_suite(&SqsDeadLetters::new(client, dlqs)).await;
}

/// A message that crash-loops past maxReceiveCount reaches the DLQ through the queue's own
/// redrive policy, without a reason: it reads as `receive_count_exceeded`.
#[tokio::test]
async fn policy_redriven_messages_read_as_receive_count_exceeded() {
    let client = common::sqs().await;
    let spec = QueueSpec {
        max_receive_count: 1,
        ..QueueSpec::default()
    };
    let (queues, dlqs) = common::channel_queues(&client, spec).await;
    let q = SqsQueues::new(client.clone(), queues);
    let d = SqsDeadLetters::new(client, dlqs);
    q.send_batch(Channel::Push, &[out("x", "crash-loop", 0)])
        .await
        .unwrap();
    let first = receive_n(&q, Channel::Push, 1, 0).await;
    assert_eq!(first.len(), 1);
    let dead = poll(BOUND, || async {
        // A receive past maxReceiveCount moves the message to the DLQ.
        q.receive(Channel::Push, 10, 0).await.unwrap();
        let got = d.receive_dead(Channel::Push, 10, 30).await.unwrap();
        got.into_iter().next()
    })
    .await
    .expect("message reaches the DLQ");
    assert_eq!(dead.message.body, "crash-loop");
    assert_eq!(dead.letter.reason, DeadReason::ReceiveCountExceeded);
    assert_eq!(dead.letter.evidence, None);
}
