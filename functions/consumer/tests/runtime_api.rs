//! The consumer bootstrap driven through a Lambda Runtime API stub, with the relative deadline
//! `cargo lambda watch` sends: it handles the record (a malformed message, dead-lettered with
//! its reason) instead of releasing every record as past a deadline in 1970.

use reminders_test_support::runtime_api;

use reminders::consumer::event::arn_for_url;
use reminders::domain::{Channel, DeadReason};
use reminders::ports::DeadLetters;
use runtime_api::{assert_calls_declared, invoke, Stack, CARGO_LAMBDA_WATCH_DEADLINE};

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn the_consumer_bootstrap_dead_letters_garbage_under_cargo_lambda_watch() {
    let stack = Stack::create("rt-cons").await;
    let mut env = stack.env();
    for c in ["PUSH", "EMAIL", "SMS"] {
        env.push((format!("{c}_PROVIDER"), "none".to_owned()));
    }
    // Required on Lambda (read on first use: this garbage record never needs it).
    let secrets = aws_sdk_secretsmanager::Client::new(&stack.sdk);
    let arn = reminders::aws::bootstrap::create_suppression_key_secret(&secrets, "rt-cons")
        .await
        .unwrap();
    env.push(("SUPPRESSION_KEY_SECRET_ARN".to_owned(), arn));
    let push_url = stack.queues.get(Channel::Push).clone();
    let event = serde_json::json!({
        "Records": [{
            "messageId": "m-1",
            "receiptHandle": "rh-1",
            "body": "this is not a delivery message",
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1"},
            "messageAttributes": {},
            "eventSource": "aws:sqs",
            "eventSourceARN": arn_for_url(&push_url, "us-east-1"),
            "awsRegion": "us-east-1"
        }]
    });
    let answer = invoke(
        env!("CARGO_BIN_EXE_consumer"),
        &env,
        event,
        CARGO_LAMBDA_WATCH_DEADLINE,
    )
    .await;
    assert_eq!(answer.kind, "response", "{:?}", answer.body);
    assert_eq!(
        answer.body["batchItemFailures"],
        serde_json::json!([]),
        "the record was handled, not released: {}",
        answer.body
    );
    assert_calls_declared("consumer", &answer);
    assert!(
        answer.aws_calls.contains("SQS.SendMessage"),
        "the dead letter went out: {:?}",
        answer.aws_calls
    );
    let dlqs = reminders::aws::SqsDeadLetters::new(
        aws_sdk_sqs::Client::new(&stack.sdk),
        stack.dlqs.clone(),
    );
    let letters = dlqs.receive_dead(Channel::Push, 10, 30).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].letter.reason, DeadReason::Schema);
}
