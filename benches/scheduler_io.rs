//! Scheduler throughput with real I/O: one run over a backlog of due reminders against the
//! emulator (`AWS_ENDPOINT_URL`), wall time and the requests it made. Not a test: a figure
//! for docs/performance.md, measured on the machine at hand. Needs the emulator running:
//!
//! ```text
//! AWS_ENDPOINT_URL=http://127.0.0.1:5000 cargo bench --bench scheduler_io -- 2000
//! ```
//!
//! Then the same run on in-memory ports where every storage and queue call waits 10 ms of
//! real time (the latency of DynamoDB and SQS in-region, without an emulator that serves one
//! request at a time): what the scheduler's own concurrency reaches.

use std::time::{Duration, Instant};

use reminders::aws::bootstrap::{create_channel_queues, create_reminders_table, QueueSpec};
use reminders::aws::dynamo::DynamoReminderStore;
use reminders::aws::SqsQueues;
use reminders::clock::{Clock, SystemClock};
use reminders::domain::{Channel, PerChannel, Reminder};
use reminders::ports::{MemoryGate, MemoryLedger, MemoryQueue, PortSet, ReminderStore};
use reminders::providers::AnyProvider;
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::MemoryStack;
use reminders_test_support::a_reminder;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    if std::env::var("AWS_ENDPOINT_URL").is_err() {
        eprintln!("scheduler_io: set AWS_ENDPOINT_URL to an emulator; emulator run skipped");
    } else {
        emulator(n).await;
    }
    with_latency(n, Duration::from_millis(10)).await;
}

fn reminder(i: u64, now: reminders::clock::Timestamp) -> Reminder {
    let due = now
        .minus(Duration::from_secs(600))
        .plus(Duration::from_millis(i));
    a_reminder(format!("b-{i:06}"), due)
        .of(format!("s-{}", i % 500))
        .text("s", "b")
        .to_address(Channel::Push, "device-1")
        .fresh_for(Duration::from_secs(3600))
        .build()
}

async fn with_latency(n: u64, latency: Duration) {
    use reminders_harness::around::{Around, Latency};
    let clock = SystemClock;
    let stack = MemoryStack::on(clock).with_shards(8);
    for i in 0..n {
        stack.store.insert(&reminder(i, clock.now())).await.unwrap();
    }
    let ports = stack
        .ports(AnyProvider::<SystemClock>::Disabled)
        .map_reminders(|s| Around::new(s, Latency { clock, latency }))
        .map_queue(|q| Around::new(q, Latency { clock, latency }));
    let scheduler = Scheduler::new(ports, SchedulerConfig::default());
    let started = Instant::now();
    let report = scheduler.run(None).await.unwrap();
    let wall = started.elapsed();
    println!(
        "scheduler_latency_{}ms: {} enqueued of {n} in {:.2} s = {:.0} reminders/s wall",
        latency.as_millis(),
        report.enqueued,
        wall.as_secs_f64(),
        f64::from(report.enqueued) / wall.as_secs_f64(),
    );
}

async fn emulator(n: u64) {
    let sdk = reminders::aws::sdk_config().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let tag = format!("bench-{}", std::process::id());
    create_reminders_table(&dynamo, &tag).await.unwrap();
    let (queues, _) = create_channel_queues(&sqs, &tag, QueueSpec::default())
        .await
        .unwrap();
    let store = DynamoReminderStore::new(dynamo, &tag, 8);
    let now = SystemClock.now();
    for i in 0..n {
        let r = reminder(i, now);
        store.insert(&r).await.unwrap();
    }
    let clock = SystemClock;
    let ports = PortSet {
        clock,
        reminders: store,
        ledger: std::sync::Arc::new(MemoryLedger::default()),
        gate: std::sync::Arc::new(MemoryGate::default()),
        queue: SqsQueues::new(sqs, queues),
        dead_letters: std::sync::Arc::new(MemoryQueue::new(clock)),
        providers: PerChannel::from_fn(|_| AnyProvider::<SystemClock>::Disabled),
    };
    let scheduler = Scheduler::new(ports, SchedulerConfig::default());
    let started = Instant::now();
    let report = scheduler.run(None).await.unwrap();
    let wall = started.elapsed();
    let r = &report.requests;
    println!(
        "scheduler_io: {} enqueued of {n} in {:.2} s = {:.0} reminders/s wall; {} queries, {} SendMessageBatch, {} UpdateItem ({:.2} ms per request)",
        report.enqueued,
        wall.as_secs_f64(),
        f64::from(report.enqueued) / wall.as_secs_f64(),
        r.queries,
        r.send_batches,
        r.writes,
        wall.as_secs_f64() * 1000.0 / f64::from(r.queries + r.send_batches + r.writes).max(1.0),
    );
}
