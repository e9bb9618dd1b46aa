//! The redrive bootstrap driven through a Lambda Runtime API stub, with the relative deadline
//! `cargo lambda watch` sends: a dry run reads the DLQ and reports by reason, instead of
//! stopping at once at a deadline in 1970.

use reminders_test_support::runtime_api;

use reminders::domain::Channel;
use reminders::ports::{DeliveryQueue, OutgoingMessage};
use runtime_api::{assert_calls_declared, invoke, Stack, CARGO_LAMBDA_WATCH_DEADLINE};

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn the_redrive_bootstrap_reports_a_dry_run_under_cargo_lambda_watch() {
    let stack = Stack::create("rt-redr").await;
    // A message the queue's redrive policy moved (no reason attribute): receive_count_exceeded.
    let dlq_as_queue =
        reminders::aws::SqsQueues::new(aws_sdk_sqs::Client::new(&stack.sdk), stack.dlqs.clone());
    let failed = dlq_as_queue
        .send_batch(
            Channel::Push,
            &[OutgoingMessage {
                entry_id: "0".into(),
                body: "crash-looped".into(),
                delay_secs: 0,
            }],
        )
        .await
        .unwrap();
    assert!(failed.is_empty());
    let request = serde_json::json!({
        "channel": "push",
        "reasons": ["receive_count_exceeded"],
        "max_messages": 10,
        "operator": "runtime-api-test"
    });
    let answer = invoke(
        env!("CARGO_BIN_EXE_redrive"),
        &stack.env(),
        request,
        CARGO_LAMBDA_WATCH_DEADLINE,
    )
    .await;
    assert_eq!(answer.kind, "response", "{:?}", answer.body);
    assert_eq!(answer.body["dry_run"], true, "{}", answer.body);
    assert_eq!(answer.body["stopped_at_deadline"], false, "{}", answer.body);
    assert_eq!(
        answer.body["by_reason"]["receive_count_exceeded"]["matched"], 1,
        "{}",
        answer.body
    );
    assert_calls_declared("redrive", &answer);
    assert!(
        answer.aws_calls.contains("SQS.ReceiveMessage"),
        "{:?}",
        answer.aws_calls
    );
}

/// A bad request is refused with an `errorType` an operator can read, naming the field.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_bad_request_is_an_invalid_request_error_naming_the_field() {
    let stack = Stack::create("rt-redr-bad").await;
    for (request, mentions) in [
        (
            serde_json::json!({"channel": "push", "reasons": ["schema"], "operator": "me"}),
            "max_messages",
        ),
        (
            serde_json::json!({"channel": "fax", "reasons": ["schema"], "max_messages": 1, "operator": "me"}),
            "channel",
        ),
        (
            serde_json::json!({"channel": "push", "reasons": [], "max_messages": 1, "operator": "me"}),
            "reason",
        ),
    ] {
        let answer = invoke(
            env!("CARGO_BIN_EXE_redrive"),
            &stack.env(),
            request.clone(),
            CARGO_LAMBDA_WATCH_DEADLINE,
        )
        .await;
        assert_eq!(answer.kind, "error", "{request}: {:?}", answer.body);
        assert_eq!(
            answer.body["errorType"], "InvalidRequest",
            "{}",
            answer.body
        );
        let message = answer.body["errorMessage"].as_str().unwrap_or_default();
        assert!(message.contains(mentions), "{request}: {message}");
    }
}
