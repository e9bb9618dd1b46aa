//! The figures `infra/bench.sh` puts in BENCHMARKS.md that come from this crate's own code:
//! the consumer's and the scheduler's CPU and AWS requests with real I/O against the emulator
//! (`AWS_ENDPOINT_URL`, served by `benches/baseline/moto_counting.py`, which counts requests),
//! and the consumer's CPU on in-memory ports. One JSON line per mode on stdout.
//!
//! ```text
//! cargo bench --bench io -- consumer 1000 events.json   # also writes the SQS events it handled
//! cargo bench --bench io -- scheduler 1000
//! cargo bench --bench io -- memory 20000
//! ```
//!
//! CPU is the process's user + system time (`getrusage`) around the measured phase only: the
//! setup (tables, reminders, messages, the receives an event source mapping would make) is
//! outside it. The provider is the in-memory scripted one (accepts everything) in every mode,
//! so the figures are the pipeline's and its AWS calls', not a provider's. The consumer runs
//! as deployed, with a suppression key: after its claim it reads the preferences and the
//! address's suppression in one `BatchGetItem` (without a key it would read the preferences
//! alone, one `GetItem`, and check no suppression).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsEvent;
use reminders::aws::bootstrap::{
    create_channel_queues, create_deliveries_table, create_reminders_table, QueueSpec,
};
use reminders::aws::dynamo::{DynamoGate, DynamoLedger, DynamoReminderStore};
use reminders::aws::{SqsDeadLetters, SqsQueues};
use reminders::clock::{Clock, SystemClock, Timestamp};
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::{Channel, PerChannel, Reminder, SuppressionKey};
use reminders::ports::{
    DeliveryQueue, MemoryGate, MemoryLedger, MemoryQueue, OutgoingMessage, PortSet, ReminderStore,
};
use reminders::providers::secret::SuppressionKeySource;
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::mapping::Mapping;
use reminders_harness::ManualClock;
use reminders_harness::MemoryStack;
use reminders_harness::ScriptedProvider;
use reminders_test_support::a_reminder;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mode = args.first().map(String::as_str).unwrap_or("");
    let n: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match mode {
        "consumer" => rt.block_on(consumer_io(n, args.get(2).map(String::as_str))),
        "scheduler" => rt.block_on(scheduler_io(n)),
        "memory" => rt.block_on(consumer_memory(n)),
        _ => {
            eprintln!("usage: io consumer N [EVENTS.json] | scheduler N | memory N");
            std::process::exit(2);
        }
    }
}

/// The deployed consumer's suppression key source (the template always gives one): the bench's
/// own key, fixed, so no secret is read.
fn key() -> SuppressionKey {
    SuppressionKey::new(b"benches/io.rs: the consumer's suppression key".to_vec())
        .expect("a key long enough")
}

fn suppression_key() -> Option<SuppressionKeySource> {
    Some(SuppressionKeySource::Fixed(key()))
}

/// User + system CPU of this process so far.
fn cpu() -> Duration {
    let (user, sys) = cpu_split();
    user + sys
}

/// User and system CPU of this process so far, apart.
fn cpu_split() -> (Duration, Duration) {
    // SAFETY: getrusage writes into the zeroed struct it is given and reads nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    (tv(u.ru_utime), tv(u.ru_stime))
}

fn reminder(prefix: &str, i: u32, due: Timestamp) -> Reminder {
    a_reminder(format!("{prefix}-{i:07}"), due)
        .of(format!("s-{}", i % 500))
        .text("Reminder", "Your appointment is soon")
        .to(&[Channel::Push])
        .fresh_for(Duration::from_secs(3600))
        .build()
}

/// The message as the scheduler enqueues it (a sole channel: marked, with its address's hash).
fn message(r: &Reminder) -> OutgoingMessage {
    let due = reminders::ports::DueReminder::from(r);
    let msg = reminders::scheduler::message_for(&due, Channel::Push, Some(&key()));
    OutgoingMessage {
        entry_id: "0".into(),
        body: msg.encode(),
        delay_secs: 0,
    }
}

/// The emulator's request counts since the last reset, and a reset.
async fn take_counts() -> BTreeMap<String, u64> {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL");
    let url = format!("{}/_bench/counts", endpoint.trim_end_matches('/'));
    match reqwest::Client::new().post(&url).send().await {
        Ok(r) => r.json().await.unwrap_or_default(),
        Err(e) => {
            eprintln!("no request counts ({url}: {e}): serve the emulator with benches/baseline/moto_counting.py");
            BTreeMap::new()
        }
    }
}

fn count(c: &BTreeMap<String, u64>, prefix: &str, ops: &[&str]) -> u64 {
    ops.iter()
        .map(|op| c.get(&format!("{prefix}.{op}")).copied().unwrap_or(0))
        .sum()
}

fn per(x: u64, n: u32) -> f64 {
    x as f64 / f64::from(n.max(1))
}

const DDB_WRITES: [&str; 5] = [
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
];
const DDB_READS: [&str; 5] = [
    "GetItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "TransactGetItems",
];

fn unique(what: &str) -> String {
    format!("bench-{what}-{}", std::process::id())
}

async fn consumer_io(n: u32, events_out: Option<&str>) {
    let sdk = reminders::aws::sdk_config().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let (rem, del) = (unique("rem"), unique("del"));
    create_reminders_table(&dynamo, &rem).await.unwrap();
    create_deliveries_table(&dynamo, &del).await.unwrap();
    let (queues, dlqs) = create_channel_queues(&sqs, &unique("q"), QueueSpec::default())
        .await
        .unwrap();
    let clock = SystemClock;
    let ports = PortSet {
        clock,
        reminders: DynamoReminderStore::new(dynamo.clone(), &rem, 8),
        ledger: DynamoLedger::new(dynamo.clone(), &del),
        gate: DynamoGate::new(dynamo, &del),
        queue: SqsQueues::new(sqs.clone(), queues.clone()),
        dead_letters: SqsDeadLetters::new(sqs, dlqs),
        providers: PerChannel::from_fn(|_| Arc::new(ScriptedProvider::new(clock, true))),
    };
    // Setup, unmeasured: the reminders, one message each, and the receives the event source
    // mapping makes.
    let now = clock.now();
    let mut batch = Vec::new();
    for i in 0..n {
        let r = reminder("c", i, now.minus(Duration::from_secs(10)));
        ports.reminders.insert(&r).await.unwrap();
        let mut m = message(&r);
        m.entry_id = batch.len().to_string();
        batch.push(m);
        if batch.len() == 10 || i + 1 == n {
            let failed = ports.queue.send_batch(Channel::Push, &batch).await.unwrap();
            assert!(
                failed.is_empty(),
                "the emulator refused entries: {failed:?}"
            );
            batch.clear();
        }
    }
    let mapping = Mapping::new(&queues, Channel::Push, 10, 900);
    let mut events: Vec<SqsEvent> = Vec::new();
    let mut received = 0;
    let mut empty_polls = 0;
    while received < n {
        let got = mapping.receive(&ports.queue).await.unwrap();
        empty_polls += u32::from(got.is_none());
        assert!(
            empty_polls < 50,
            "only {received} of {n} messages came back"
        );
        if let Some(batch) = got {
            received += batch.messages.len() as u32;
            events.push(batch.event);
        }
    }
    if let Some(path) = events_out {
        std::fs::write(path, serde_json::to_string(&events).unwrap()).unwrap();
    }
    let cfg = ConsumerConfig {
        emit_metrics: false,
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(ports, cfg, queues, 1).with_suppression_key(suppression_key());
    take_counts().await;
    let (split0, wall0) = (cpu_split(), Instant::now());
    let mut delivered = 0;
    for event in events {
        let out = consumer.handle(event, None).await;
        delivered += out.metrics.get(Channel::Push).delivered;
    }
    let split = cpu_split();
    let (user, sys) = (split.0 - split0.0, split.1 - split0.1);
    let (cpu_used, wall) = (user + sys, wall0.elapsed());
    let c = take_counts().await;
    assert_eq!(delivered, n, "every delivery delivered");
    let gate_reads = c.get("dynamodb.GetItem.gate").copied().unwrap_or(0);
    let line = serde_json::json!({
        "mode": "consumer_io",
        "reminders_table": rem,
        "deliveries": delivered,
        "cpu_us_per_delivery": cpu_used.as_secs_f64() * 1e6 / f64::from(delivered),
        // The kernel's share: socket reads and writes of the loopback round trips.
        "sys_share": sys.as_secs_f64() / cpu_used.as_secs_f64().max(1e-9),
        "wall_ms_per_delivery": wall.as_secs_f64() * 1e3 / f64::from(delivered),
        "ddb_writes_per_delivery": per(count(&c, "dynamodb", &DDB_WRITES), delivered),
        "ddb_reads_per_delivery": per(count(&c, "dynamodb", &DDB_READS) - gate_reads, delivered),
        "gate_reads_per_delivery": per(gate_reads, delivered),
        "sqs_requests_per_delivery": per(
            c.iter().filter(|(k, _)| k.starts_with("sqs.")).map(|(_, v)| v).sum(),
            delivered
        ),
        "requests": c,
    });
    println!("{line}");
}

async fn scheduler_io(n: u32) {
    let sdk = reminders::aws::sdk_config().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let rem = unique("srem");
    create_reminders_table(&dynamo, &rem).await.unwrap();
    let (queues, _) = create_channel_queues(&sqs, &unique("sq"), QueueSpec::default())
        .await
        .unwrap();
    let store = DynamoReminderStore::new(dynamo, &rem, 8);
    let clock = SystemClock;
    let now = clock.now();
    for i in 0..n {
        store
            .insert(&reminder("s", i, now.minus(Duration::from_secs(600))))
            .await
            .unwrap();
    }
    let ports = PortSet {
        clock,
        reminders: store,
        ledger: Arc::new(MemoryLedger::default()),
        gate: Arc::new(MemoryGate::default()),
        queue: SqsQueues::new(sqs, queues),
        dead_letters: Arc::new(MemoryQueue::new(clock)),
        providers: PerChannel::from_fn(|_| Arc::new(ScriptedProvider::new(clock, true))),
    };
    let scheduler = Scheduler::new(ports, SchedulerConfig::default());
    take_counts().await;
    let (cpu0, wall0) = (cpu(), Instant::now());
    let mut enqueued = 0;
    while enqueued < n {
        let report = scheduler.run(None).await.unwrap();
        if report.enqueued == 0 {
            break;
        }
        enqueued += report.enqueued;
    }
    let (cpu_used, wall) = (cpu() - cpu0, wall0.elapsed());
    let c = take_counts().await;
    assert_eq!(enqueued, n, "every reminder enqueued");
    let line = serde_json::json!({
        "mode": "scheduler_io",
        "reminders": enqueued,
        "reminders_per_cpu_second": f64::from(enqueued) / cpu_used.as_secs_f64(),
        "reminders_per_wall_second": f64::from(enqueued) / wall.as_secs_f64(),
        "ddb_writes_per_reminder": per(count(&c, "dynamodb", &DDB_WRITES), enqueued),
        "ddb_reads_per_reminder": per(count(&c, "dynamodb", &DDB_READS), enqueued),
        "sqs_requests_per_delivery": per(
            c.iter().filter(|(k, _)| k.starts_with("sqs.")).map(|(_, v)| v).sum(),
            enqueued
        ),
        "requests": c,
    });
    println!("{line}");
}

/// The same consumer over in-memory ports: its own CPU per record, no I/O at all.
async fn consumer_memory(n: u32) {
    let t0 = Timestamp::from_millis(1_800_000_000_000);
    let stack = MemoryStack::on(ManualClock::at(t0)).with_shards(8);
    let MemoryStack {
        clock,
        store,
        queue,
        ..
    } = stack.clone();
    let ports = stack.ports_with(PerChannel::from_fn(|_| {
        Arc::new(ScriptedProvider::new(clock.clone(), true))
    }));
    let urls = PerChannel::from_fn(|c| format!("http://q/000000000000/q-{c}"));
    let mapping = Mapping::new(&urls, Channel::Push, 10, 900);
    let mut events = Vec::new();
    for start in (0..n).step_by(10) {
        for i in start..(start + 10).min(n) {
            let r = reminder("m", i, t0.minus(Duration::from_secs(10)));
            store.insert(&r).await.unwrap();
            queue
                .send_batch(Channel::Push, &[message(&r)])
                .await
                .unwrap();
        }
        let batch = mapping.receive(&queue).await.unwrap();
        events.push(batch.expect("the messages just sent").event);
    }
    let cfg = ConsumerConfig {
        emit_metrics: false,
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(ports, cfg, urls, 1).with_suppression_key(suppression_key());
    let cpu0 = cpu();
    let mut delivered = 0;
    for event in events {
        delivered += consumer
            .handle(event, None)
            .await
            .metrics
            .get(Channel::Push)
            .delivered;
    }
    let used = cpu() - cpu0;
    assert_eq!(delivered, n);
    let line = serde_json::json!({
        "mode": "consumer_memory",
        "records": delivered,
        "cpu_us_per_record": used.as_secs_f64() * 1e6 / f64::from(delivered),
    });
    println!("{line}");
}
