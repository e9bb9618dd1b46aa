//! The scheduler bootstrap driven through a Lambda Runtime API stub, with the relative
//! deadline `cargo lambda watch` sends: it runs without a deadline (and warns) and fans out
//! the due reminder, instead of reading 600000 as an epoch in 1970 and doing nothing.

#[path = "../../../tests/support/runtime_api.rs"]
mod runtime_api;

use std::time::Duration;

use reminders::aws::dynamo::DynamoReminderStore;
use reminders::clock::{Clock, SystemClock};
use reminders::domain::{
    Channel, Content, NewReminder, Recipient, Reminder, ReminderId, SubscriberId,
};
use reminders::ports::{DeliveryQueue, ReminderStore};
use runtime_api::{assert_calls_declared, invoke, Stack, CARGO_LAMBDA_WATCH_DEADLINE};

#[tokio::test]
async fn the_scheduler_bootstrap_fans_out_under_cargo_lambda_watch() {
    let stack = Stack::create("rt-sched").await;
    let store = DynamoReminderStore::new(
        aws_sdk_dynamodb::Client::new(&stack.sdk),
        &stack.reminders_table,
        reminders::aws::config::DEFAULT_DUE_SHARDS,
    );
    let due = SystemClock.now().minus(Duration::from_secs(5));
    let r = Reminder::new(
        NewReminder {
            reminder_id: ReminderId::parse("rt-1").unwrap(),
            subscriber_id: SubscriberId::parse("s-1").unwrap(),
            due_at: due,
            fresh_until: None,
            content: Content::Text {
                subject: "s".into(),
                body: "b".into(),
            },
            recipients: vec![Recipient::parse(Channel::Push, "device-1").unwrap()],
        },
        Duration::from_secs(3600),
        Duration::from_secs(86_400),
    )
    .unwrap();
    store.insert(&r).await.unwrap();
    let answer = invoke(
        env!("CARGO_BIN_EXE_scheduler"),
        &stack.env(),
        serde_json::json!({}),
        CARGO_LAMBDA_WATCH_DEADLINE,
    )
    .await;
    assert_eq!(answer.kind, "response", "{:?}", answer.body);
    assert_eq!(answer.body["enqueued"], 1, "{}", answer.body);
    assert_eq!(answer.body["stopped_at_deadline"], false, "{}", answer.body);
    assert_calls_declared("scheduler", &answer);
    for call in [
        "DynamoDB.Query",
        "DynamoDB.UpdateItem",
        "SQS.SendMessageBatch",
    ] {
        assert!(answer.aws_calls.contains(call), "{:?}", answer.aws_calls);
    }
    let queues =
        reminders::aws::SqsQueues::new(aws_sdk_sqs::Client::new(&stack.sdk), stack.queues.clone());
    let depth = queues.depth(Channel::Push).await.unwrap();
    assert_eq!(depth.total(), 1, "{depth:?}");
}
