//! The feedback bootstrap driven through a Lambda Runtime API stub against the emulator: SES
//! feedback in the shapes it arrives in (an EventBridge event from the configuration set's
//! destination, an SNS notification), a body that is not feedback, and what lands: the
//! suppressions in the reminders table under the keyed hash the consumer looks up, and the
//! garbage in the feedback DLQ with its reason.

use reminders_test_support::runtime_api;
use reminders_test_support::suppression_key;

use reminders::domain::{AddressHash, Channel, Recipient, SuppressionSource};
use reminders::ports::ReminderStore;
use runtime_api::{assert_calls_declared, invoke, Stack, CARGO_LAMBDA_WATCH_DEADLINE};
use serde_json::json;

fn record(id: &str, body: &str) -> serde_json::Value {
    json!({
        "messageId": id,
        "receiptHandle": format!("rh-{id}"),
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1"},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:rt-feedback",
        "awsRegion": "us-east-1"
    })
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn feedback_suppresses_bounces_and_complaints_and_dead_letters_garbage() {
    let stack = Stack::create("rt-fb").await;
    let mut env = stack.env();
    let (arn, key) = suppression_key::suppression_key_secret(&stack.sdk, "rt-fb").await;
    env.push(("SUPPRESSION_KEY_SECRET_ARN".to_owned(), arn.clone()));
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    let dlq = sqs
        .create_queue()
        .queue_name(format!("rt-fb-{}-feedback-dlq", std::process::id()))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    env.push(("FEEDBACK_DLQ_URL".to_owned(), dlq.clone()));

    let bounce = json!({
        "version": "0", "id": "e-1", "detail-type": "Email Bounced", "source": "aws.ses",
        "account": "123456789012", "time": "2026-12-04T10:00:01Z", "region": "us-east-1",
        "resources": [], "detail": {
            "eventType": "Bounce",
            "bounce": {"bounceType": "Permanent", "bounceSubType": "General",
                       "bouncedRecipients": [{"emailAddress": "Gone@Example.org", "status": "5.1.1"}],
                       "timestamp": "2026-12-04T10:00:00.000Z", "feedbackId": "f-1"},
            "mail": {"messageId": "m-1", "destination": ["Gone@Example.org"],
                     "tags": {"ses:configuration-set": ["rt-fb-email"]}}}
    });
    let complaint = json!({
        "Type": "Notification", "MessageId": "sns-1",
        "Message": json!({"eventType": "Complaint",
                          "complaint": {"complainedRecipients": [{"emailAddress": "angry@example.org"}],
                                        "feedbackId": "f-2", "timestamp": "2026-12-04T11:00:00.000Z"},
                          "mail": {"messageId": "m-2"}}).to_string()
    });
    let event = json!({"Records": [
        record("m-1", &bounce.to_string()),
        record("m-2", &complaint.to_string()),
        record("m-3", "not feedback at all"),
    ]});
    let answer = invoke(
        env!("CARGO_BIN_EXE_feedback"),
        &env,
        event,
        CARGO_LAMBDA_WATCH_DEADLINE,
    )
    .await;
    assert_eq!(answer.kind, "response", "{:?}", answer.body);
    assert_eq!(
        answer.body["batchItemFailures"],
        json!([]),
        "{}",
        answer.body
    );
    assert_calls_declared("feedback", &answer);
    for call in [
        "DynamoDB.PutItem",
        "SQS.SendMessage",
        "Secrets Manager.GetSecretValue",
    ] {
        assert!(
            answer.aws_calls.contains(call),
            "{call}: {:?}",
            answer.aws_calls
        );
    }

    // Found as the consumer finds them: by the keyed hash of the address.
    let store = reminders::aws::dynamo::DynamoReminderStore::new(
        aws_sdk_dynamodb::Client::new(&stack.sdk),
        &stack.reminders_table,
        8,
    );
    for (address, source) in [
        ("gone@example.org", SuppressionSource::SesBounce),
        ("angry@example.org", SuppressionSource::SesComplaint),
    ] {
        let r = Recipient::parse(Channel::Email, address).unwrap();
        let sup = store
            .suppression(&AddressHash::of(&key, &r))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{address} is not suppressed"));
        assert_eq!(sup.source, source);
        assert_eq!(sup.channel, Channel::Email);
    }
    let got = sqs
        .receive_message()
        .queue_url(&dlq)
        .message_attribute_names("All")
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].body.as_deref(), Some("not feedback at all"));
    let reason = got[0].message_attributes.as_ref().unwrap()["reason"]
        .string_value
        .clone();
    assert_eq!(reason.as_deref(), Some("malformed_feedback: not JSON"));
}
