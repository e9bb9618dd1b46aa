//! The events bootstrap driven through a Lambda Runtime API stub with a DynamoDB stream event
//! read from the emulator's real ledger stream (two writes: one settles, one does not): one
//! event reaches the bus, and through its rule the tap queue, with the contract's detail.

use reminders_test_support::runtime_api;

use std::time::{Duration, Instant};

use reminders::aws::bootstrap::create_events_tap;
use reminders::aws::dynamo::DynamoLedger;
use reminders::aws::streams::DynamoStream;
use reminders::clock::{Clock, SystemClock};
use reminders::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};
use reminders::ledger::{apply, Change, Ctx, LeaseToken, Origin};
use reminders::policy::RetryPolicy;
use reminders::ports::{Expected, Ledger, LedgerStream};
use runtime_api::{assert_calls_declared, invoke, Stack, CARGO_LAMBDA_WATCH_DEADLINE};

fn ctx(reminder: &str) -> Ctx {
    let origin = Origin {
        reminder_id: ReminderId::parse(reminder).unwrap(),
        subscriber_id: SubscriberId::parse("u-42").unwrap(),
        channel: Channel::Email,
        fallback_from: None,
        chain_head: false,
        chain: Vec::new(),
        unknown: Default::default(),
    };
    Ctx {
        key: DeliveryKey::derive(&origin.reminder_id, &origin.subscriber_id, origin.channel),
        now: SystemClock.now(),
        expires_at: 2_000_000_000,
        origin: Some(origin),
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn the_events_bootstrap_publishes_one_event_per_settled_write() {
    let stack = Stack::create("rt-events").await;
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    let bridge = aws_sdk_eventbridge::Client::new(&stack.sdk);
    let tap = create_events_tap(&bridge, &sqs, &format!("rt-ev-{}", std::process::id()))
        .await
        .unwrap();
    let dynamo = aws_sdk_dynamodb::Client::new(&stack.sdk);
    let ledger = DynamoLedger::new(dynamo.clone(), &stack.deliveries_table);
    let cancelled = apply(None, Change::Cancel, &ctx("r-cancelled")).unwrap();
    let claim = Change::Claim {
        token: LeaseToken::generate(&mut rand::rng()),
        lease_expires_at: SystemClock.now().plus(Duration::from_secs(60)),
        payload_version: 1,
        policy: RetryPolicy::default(),
    };
    let sending = apply(None, claim, &ctx("r-sending")).unwrap();
    for r in [&cancelled, &sending] {
        ledger.put_if(r, Expected::Absent).await.unwrap();
    }
    let streams = aws_sdk_dynamodbstreams::Client::new(&stack.sdk);
    let stream = DynamoStream::of_table(&dynamo, streams, &stack.deliveries_table)
        .await
        .unwrap()
        .expect("the deliveries table has a stream");
    let shard = stream.shards().await.unwrap().remove(0);
    let records = stream.read(&shard, None, 100).await.unwrap();
    assert_eq!(records.len(), 2);
    let event = serde_json::json!({ "Records": records });

    let mut env = stack.env();
    env.push(("EVENT_BUS_NAME".into(), tap.bus.clone()));
    let answer = invoke(
        env!("CARGO_BIN_EXE_events"),
        &env,
        event,
        CARGO_LAMBDA_WATCH_DEADLINE,
    )
    .await;
    assert_eq!(answer.kind, "response", "{:?}", answer.body);
    assert_eq!(
        answer.body,
        serde_json::json!({"batchItemFailures": []}),
        "{}",
        answer.body
    );
    assert_calls_declared("events", &answer);
    assert!(
        answer.aws_calls.contains("EventBridge.PutEvents"),
        "{:?}",
        answer.aws_calls
    );

    let bodies = drain(&sqs, &tap.queue_url, 1).await;
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let e: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(e["source"], "reminders");
    assert_eq!(e["detail-type"], "Reminder Delivery Settled");
    let d = &e["detail"];
    assert_eq!(d["delivery_key"], cancelled.key().as_str());
    assert_eq!(
        (&d["reminder_id"], &d["subscriber_id"], &d["channel"]),
        (&"r-cancelled".into(), &"u-42".into(), &"email".into())
    );
    assert_eq!(
        (&d["outcome"], &d["from"], &d["transition"]),
        (&"cancelled".into(), &"scheduled".into(), &1.into())
    );
    assert_eq!(d["at"], cancelled.updated_at().to_rfc3339());
}

/// Every message in `url`, waiting up to 20 s for the first `expect` to arrive, then one
/// more empty poll to show no other followed.
async fn drain(sqs: &aws_sdk_sqs::Client, url: &str, expect: usize) -> Vec<String> {
    let started = Instant::now();
    let mut bodies = Vec::new();
    loop {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default();
        let empty = got.is_empty();
        bodies.extend(got.into_iter().filter_map(|m| m.body));
        if empty && (bodies.len() >= expect || started.elapsed() > Duration::from_secs(20)) {
            return bodies;
        }
    }
}
