//! End to end on the emulator, through the local runner: 150 reminders over the three
//! channels, due times staggered, delivered by the generic HTTP provider to a test server that
//! injects 429s, 5xx and permanent errors (policies in seconds). Every reminder ends delivered,
//! dead (in its DLQ, with a reason) or expired, and no delivery key is accepted twice.

use reminders_test_support::server;

mod outage;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reminders::aws::bootstrap::{
    create_channel_queues, create_deliveries_table, create_reminders_table, QueueSpec,
};
use reminders::aws::dynamo::{DynamoGate, DynamoLedger, DynamoReminderStore};
use reminders::aws::{SqsDeadLetters, SqsQueues};
use reminders::clock::{Clock, SystemClock};
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::{
    Channel, Content, DeadReason, DeliveryKey, NewReminder, Recipient, Reminder, ReminderId,
    SubscriberId,
};
use reminders::ledger::Status;
use reminders::policy::{Backoff, RetryPolicy};
use reminders::ports::{DeadLetters, Ledger, PortSet, ReminderStore};
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::local::{self, LocalConfig, Stop};

use server::{respond, respond_with, serve_fn, Behaviour, Recorded};

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// What the test provider does with a delivery, by the reminder's id.
fn plan(reminder_id: &str) -> &'static str {
    let n: u32 = reminder_id
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    if reminder_id.starts_with("short") {
        return "throttle_past_freshness";
    }
    match n % 10 {
        0 => "permanent",
        1 => "throttle_once",
        2 => "error_once",
        3 if n % 20 == 3 => "error_always",
        _ => "ok",
    }
}

#[derive(Default)]
struct Remote {
    attempts: HashMap<String, u32>,
    accepted: HashMap<String, u32>,
}

fn decide(remote: &Arc<Mutex<Remote>>, req: &Recorded) -> Behaviour {
    let key = req.header("idempotency-key").unwrap_or_default();
    let body: serde_json::Value = serde_json::from_str(&req.body).unwrap_or_default();
    let reminder = body["subject"].as_str().unwrap_or_default().to_owned();
    let mut r = remote.lock().unwrap();
    let attempt = {
        let a = r.attempts.entry(key.clone()).or_default();
        *a += 1;
        *a
    };
    let outcome = match (plan(&reminder), attempt) {
        ("permanent", _) => respond(400, ""),
        ("throttle_once", 1) => respond_with(429, ("Retry-After", "1")),
        ("error_once", 1) | ("error_always", _) => respond(503, ""),
        ("throttle_past_freshness", _) => respond_with(429, ("Retry-After", "30")),
        _ => respond(200, &format!(r#"{{"id":"msg-{key}"}}"#)),
    };
    if let Behaviour::Respond { status: 200, .. } = &outcome {
        *r.accepted.entry(key).or_default() += 1;
    }
    outcome
}

/// The ports of a stack on the emulator: fresh tables and channel queues named after
/// `prefix`, and every channel's generic HTTP provider pointed at `url`.
pub(crate) type EmulatorPorts = PortSet<
    SystemClock,
    DynamoReminderStore,
    DynamoLedger,
    DynamoGate,
    SqsQueues,
    SqsDeadLetters,
    reminders::providers::AnyProvider<SystemClock>,
>;

pub(crate) async fn emulator_stack(
    prefix: &str,
    url: &str,
) -> (EmulatorPorts, reminders::domain::PerChannel<String>) {
    let sdk = reminders::aws::sdk_config().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let (rem, del) = (
        unique(&format!("{prefix}-rem")),
        unique(&format!("{prefix}-del")),
    );
    create_reminders_table(&dynamo, &rem).await.unwrap();
    create_deliveries_table(&dynamo, &del).await.unwrap();
    let spec = QueueSpec {
        visibility_timeout_secs: 10,
        max_receive_count: 50,
        ..QueueSpec::default()
    };
    let (queues, dlqs) = create_channel_queues(&sqs, &unique(prefix), spec)
        .await
        .unwrap();
    let env: HashMap<String, String> = Channel::ALL
        .iter()
        .flat_map(|c| {
            let up = c.as_str().to_uppercase();
            [
                (format!("{up}_PROVIDER"), "http".to_owned()),
                (format!("{up}_HTTP_ENDPOINT"), url.to_owned()),
            ]
        })
        // The receiver is on loopback: plain http, asked for as a local run does.
        .chain([(
            reminders::providers::ALLOW_LOOPBACK_HTTP_VAR.to_owned(),
            "1".to_owned(),
        )])
        .collect();
    let providers = reminders::providers::from_lookup(
        |k| env.get(k).cloned(),
        SystemClock,
        Duration::from_secs(2),
        &sdk,
    )
    .unwrap();
    let ports = PortSet {
        clock: SystemClock,
        reminders: DynamoReminderStore::new(dynamo.clone(), &rem, 4),
        ledger: DynamoLedger::new(dynamo.clone(), &del),
        gate: DynamoGate::new(dynamo, &del),
        queue: SqsQueues::new(sqs.clone(), queues.clone()),
        dead_letters: SqsDeadLetters::new(sqs, dlqs),
        providers,
    };
    (ports, queues)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn one_hundred_fifty_reminders_end_delivered_dead_or_expired_and_none_twice() {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let remote = Arc::new(Mutex::new(Remote::default()));
    let r2 = remote.clone();
    let server = serve_fn(Arc::new(move |req| decide(&r2, req))).await;

    let (ports, queues) = emulator_stack("e2e", &server.url).await;
    let consumer_cfg = ConsumerConfig {
        policy: RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::Schedule {
                schedule_secs: vec![0, 1, 1],
            },
            throttle_base_secs: 1,
            throttle_cap_secs: 2,
            max_throttle_deferrals: 20,
            ..RetryPolicy::default()
        },
        lease: Duration::from_secs(8),
        provider_timeout: Duration::from_secs(2),
        deadline_margin: Duration::from_secs(3),
        max_receive_count: 50,
        emit_metrics: false,
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(ports.clone(), consumer_cfg, queues.clone(), 99);
    let scheduler_cfg = SchedulerConfig {
        look_ahead: Duration::from_secs(5),
        schedule_period: Duration::from_secs(2),
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::new(ports.clone(), scheduler_cfg);

    // 150 reminders, 50 per channel, due over the next 20 seconds; three per channel have a
    // freshness of two seconds and meet a provider that throttles for thirty.
    let now = SystemClock.now();
    let mut keys: Vec<(String, DeliveryKey)> = Vec::new();
    for (ci, channel) in Channel::ALL.into_iter().enumerate() {
        for i in 0..50u64 {
            let id = if i < 3 {
                format!("short-{}-{i}", channel.as_str())
            } else {
                format!("r-{}-{i}", channel.as_str())
            };
            let due = now.plus(Duration::from_millis((i * 400 + ci as u64 * 130) % 20_000));
            // The two-second reminders fall due after the inserts (moto takes a few seconds
            // for 150 of them), so that the scheduler enqueues them rather than expiring them.
            let due = if i < 3 {
                due.plus(Duration::from_secs(6))
            } else {
                due
            };
            let fresh = if i < 3 {
                Duration::from_secs(2)
            } else {
                Duration::from_secs(600)
            };
            let recipient = match channel {
                Channel::Sms => Recipient::parse(channel, "+14155550123"),
                Channel::Email => Recipient::parse(channel, "person@example.com"),
                Channel::Push => Recipient::parse(channel, "device-token-1"),
            }
            .unwrap();
            let r = Reminder::new(
                NewReminder {
                    reminder_id: ReminderId::parse(&id).unwrap(),
                    subscriber_id: SubscriberId::parse(format!("sub-{i}")).unwrap(),
                    due_at: due,
                    fresh_until: Some(due.plus(fresh)),
                    // The test server reads its plan from the subject.
                    content: Content::Text {
                        subject: id.clone(),
                        body: "e2e".into(),
                    },
                    recipients: vec![recipient],
                },
                Duration::from_secs(600),
                Duration::from_secs(3600),
            )
            .unwrap();
            ports.reminders.insert(&r).await.unwrap();
            keys.push((
                id,
                DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel),
            ));
        }
    }

    let cfg = LocalConfig {
        schedule_period: Duration::from_secs(2),
        visibility_secs: 10,
        function_timeout: Duration::from_secs(20),
        poll_interval: Duration::from_millis(200),
        ..LocalConfig::default()
    };
    let report = local::run(
        &scheduler,
        &consumer,
        &queues,
        &cfg,
        // About 40 s alone; the bound only ends a run that stalls. One LocalStack leg, with
        // the rest of the suite beside it, took 241 s: the SMS breaker, opened by the
        // thirty-second throttle, stayed open 203 s in all, and the last delivery had not
        // settled at 240 s. What this test holds is how each ends, not how soon.
        Stop::Idle {
            at_most: Duration::from_secs(480),
        },
        &std::sync::atomic::AtomicBool::new(false),
        None,
    )
    .await
    .unwrap();
    assert!(report.idle, "the pipeline went idle: {report:?}");

    let mut by_status: BTreeMap<String, u32> = BTreeMap::new();
    let mut dead: BTreeMap<DeliveryKey, DeadReason> = BTreeMap::new();
    for (id, key) in &keys {
        let rec = ports
            .ledger
            .get(key)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{id} has no ledger item"));
        let status = rec.status();
        assert!(
            matches!(status, Status::Delivered | Status::Dead | Status::Expired),
            "{id} ended {status:?}"
        );
        *by_status.entry(status.as_str().to_owned()).or_default() += 1;
        if status == Status::Dead {
            dead.insert(key.clone(), rec.dead_reason().unwrap());
        }
        let expected = match plan(id) {
            "permanent" => Status::Dead,
            "error_always" => Status::Dead,
            "throttle_past_freshness" => Status::Expired,
            _ => Status::Delivered,
        };
        assert_eq!(status, expected, "{id}");
    }
    // Every dead delivery has its DLQ copy, with the ledger's reason.
    let mut in_dlq: BTreeMap<DeliveryKey, DeadReason> = BTreeMap::new();
    for channel in Channel::ALL {
        loop {
            let got = ports
                .dead_letters
                .receive_dead(channel, 10, 60)
                .await
                .unwrap();
            if got.is_empty() {
                break;
            }
            for m in got {
                let msg = reminders::domain::DeliveryMessage::decode(&m.message.body).unwrap();
                in_dlq.insert(msg.delivery_key, m.letter.reason);
            }
        }
    }
    assert_eq!(in_dlq, dead, "DLQ evidence matches the ledger");
    let remote = remote.lock().unwrap();
    for (key, n) in &remote.accepted {
        assert_eq!(*n, 1, "delivery key {key} was accepted {n} times");
    }
    eprintln!(
        "e2e: {by_status:?}, scheduler runs {}, batches {}",
        report.scheduler_runs, report.batches
    );
    assert!(by_status["delivered"] > 100 && by_status["dead"] > 10 && by_status["expired"] == 9);
}
