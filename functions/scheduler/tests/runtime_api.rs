//! The scheduler bootstrap driven through a Lambda Runtime API stub, with the relative
//! deadline `cargo lambda watch` sends: it runs without a deadline (and warns) and fans out
//! the due reminder, instead of reading 600000 as an epoch in 1970 and doing nothing.

use reminders_test_support::runtime_api;

use std::time::Duration;

use reminders::aws::dynamo::DynamoReminderStore;
use reminders::clock::{Clock, SystemClock};
use reminders::domain::{
    Channel, Content, NewReminder, Recipient, Reminder, ReminderId, SubscriberId,
};
use reminders::ports::{DeliveryQueue, ReminderStore};
use runtime_api::{assert_calls_declared, invoke, Stack, CARGO_LAMBDA_WATCH_DEADLINE};

/// The stack's environment, with the suppression key's secret (required on Lambda: the
/// scheduler hashes a sole channel's address onto its message).
async fn env_with_key(stack: &Stack, name: &str) -> Vec<(String, String)> {
    let mut env = stack.env();
    let secrets = aws_sdk_secretsmanager::Client::new(&stack.sdk);
    let arn = reminders::aws::bootstrap::create_suppression_key_secret(&secrets, name)
        .await
        .unwrap();
    env.push(("SUPPRESSION_KEY_SECRET_ARN".to_owned(), arn));
    env
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
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
        &env_with_key(&stack, "rt-sched").await,
        serde_json::json!({}),
        CARGO_LAMBDA_WATCH_DEADLINE,
    )
    .await;
    assert_eq!(answer.kind, "response", "{:?}", answer.body);
    assert_eq!(answer.body["enqueued"], 1, "{}", answer.body);
    assert_eq!(answer.body["stopped_at_deadline"], false, "{}", answer.body);
    assert_calls_declared("scheduler", &answer);
    // The key is read for the sole message's hash.
    for call in [
        "DynamoDB.Query",
        "DynamoDB.UpdateItem",
        "SQS.SendMessageBatch",
        "Secrets Manager.GetSecretValue",
    ] {
        assert!(answer.aws_calls.contains(call), "{:?}", answer.aws_calls);
    }
    let queues =
        reminders::aws::SqsQueues::new(aws_sdk_sqs::Client::new(&stack.sdk), stack.queues.clone());
    let depth = queues.depth(Channel::Push).await.unwrap();
    assert_eq!(depth.total(), 1, "{depth:?}");
}

/// The maker's calls as deployed (the first share, after its scan), held to the role's list:
/// a series whose edit is still pending (the edit moved its next occurrence by a minute) is
/// brought in line by the scheduler: the occurrence the new rule no longer makes is
/// cancelled, the one it makes now is made, and the series' edit is no longer pending.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn the_scheduler_bootstrap_finishes_a_pending_series_edit_with_its_declared_calls() {
    use reminders::aws::dynamo::DynamoLedger;
    use reminders::domain::series::{occurrence_id, NewSeries, Series};
    use reminders::domain::{Access, ReminderStatus, Retention, SeriesId};
    use reminders::ports::{ExpectedSeries, SeriesStore};

    let stack = Stack::create("rt-series").await;
    let dynamo = aws_sdk_dynamodb::Client::new(&stack.sdk);
    let store = DynamoReminderStore::new(
        dynamo.clone(),
        &stack.reminders_table,
        reminders::aws::config::DEFAULT_DUE_SHARDS,
    );
    let ledger = DynamoLedger::new(dynamo, &stack.deliveries_table);
    let now = SystemClock.now();
    // Occurrences on the minute, 5 and 7 minutes from now (in UTC): inside the make-ahead.
    let minute =
        |m: i64| reminders::clock::Timestamp::from_millis((now.as_millis() / 60_000 + m) * 60_000);
    let rule = |at: reminders::clock::Timestamp| {
        let m = at.as_millis() / 60_000 % (24 * 60);
        format!("FREQ=DAILY;BYHOUR={};BYMINUTE={}", m / 60, m % 60)
    };
    let (old_at, new_at) = (minute(5), minute(7));
    let new = NewSeries {
        series_id: SeriesId::parse("rt-series-1").unwrap(),
        subscriber_id: SubscriberId::parse("s-1").unwrap(),
        rule: rule(old_at),
        zone: "UTC".into(),
        // On the minute: a rule without BYSECOND takes its seconds from the start.
        starts_at: minute(0),
        until: None,
        fresh_for: Some(Duration::from_secs(600)),
        content: Content::Text {
            subject: "s".into(),
            body: "b".into(),
        },
        recipients: vec![Recipient::parse(Channel::Push, "device-1").unwrap()],
    };
    let s = Series::new(new, Duration::from_secs(600)).unwrap();
    let id = s.series_id.clone();
    let retention = Retention::default();
    reminders::series::put(&store, &ledger, &Access::Any, s, now, retention)
        .await
        .unwrap()
        .unwrap();
    let old = occurrence_id(&id, old_at);
    assert!(store.get(&old).await.unwrap().is_some(), "made at once");
    // The edit as one that stopped after its write: the new rule stored, pending.
    let v1 = store.get_series(&id).await.unwrap().unwrap();
    let mut v2 = v1.clone();
    v2.rule = reminders::domain::series::Rule::parse(&rule(new_at)).unwrap();
    v2.version += 1;
    v2.pending = true;
    store
        .put_series(&v2, ExpectedSeries::of(&v1))
        .await
        .unwrap();

    let answer = invoke(
        env!("CARGO_BIN_EXE_scheduler"),
        &env_with_key(&stack, "rt-series").await,
        serde_json::json!({"share": 0, "shares": 1}),
        CARGO_LAMBDA_WATCH_DEADLINE,
    )
    .await;
    assert_eq!(answer.kind, "response", "{:?}", answer.body);
    assert_calls_declared("scheduler", &answer);
    for call in ["DynamoDB.Query", "DynamoDB.GetItem", "DynamoDB.PutItem"] {
        assert!(answer.aws_calls.contains(call), "{:?}", answer.aws_calls);
    }
    let stored = store.get_series(&id).await.unwrap().unwrap();
    assert!(!stored.pending, "the edit is in line: {stored:?}");
    let old = store.get(&old).await.unwrap().unwrap();
    assert_eq!(old.status, ReminderStatus::Cancelled, "{old:?}");
    let made = store
        .get(&occurrence_id(&id, new_at))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(made.status, ReminderStatus::Scheduled, "{made:?}");
}
