//! `remindctl local up | run`: the template's resources on an emulator, and the pipeline
//! played locally (the scheduler's schedule and each channel's event source mapping).

use std::time::Duration;

use reminders::aws::bootstrap::{
    create_channel_queues, create_deliveries_table, create_reminders_table, QueueSpec,
};
use reminders::aws::{Adapters, Settings};
use reminders::clock::SystemClock;
use reminders::config::env;
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::Channel;
use reminders::local::{self, LocalConfig, Stop};
use reminders::ports::PortSet;
use reminders::scheduler::{Scheduler, SchedulerConfig};

/// Creating or driving resources is for emulators only: the template owns them on AWS.
fn require_emulator() -> Result<String, String> {
    env("AWS_ENDPOINT_URL").ok_or_else(|| {
        "AWS_ENDPOINT_URL is not set: `local` commands only run against an emulator (moto, \
         LocalStack); deploy template.yaml for AWS"
            .to_owned()
    })
}

pub async fn up(prefix: &str, shards: u32) -> Result<(), String> {
    let endpoint = require_emulator()?;
    let sdk = reminders::aws::sdk_config().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let sqs = aws_sdk_sqs_client(&sdk);
    let (rem, del) = (
        format!("{prefix}-reminders"),
        format!("{prefix}-deliveries"),
    );
    let existing = dynamo
        .list_tables()
        .send()
        .await
        .map_err(|e| format!("cannot reach {endpoint}: {}", one_line(&e)))?
        .table_names
        .unwrap_or_default();
    if !existing.contains(&rem) {
        create_reminders_table(&dynamo, &rem)
            .await
            .map_err(|e| format!("creating {rem}: {e}"))?;
    }
    if !existing.contains(&del) {
        create_deliveries_table(&dynamo, &del)
            .await
            .map_err(|e| format!("creating {del}: {e}"))?;
    }
    let (queues, dlqs) = create_channel_queues(&sqs, prefix, QueueSpec::default())
        .await
        .map_err(|e| format!("creating queues: {e}"))?;
    println!("# resources on {endpoint}; export these for `remindctl local run`:");
    println!("export REMINDERS_TABLE={rem}");
    println!("export DELIVERIES_TABLE={del}");
    println!("export DUE_SHARDS={shards}");
    for c in Channel::ALL {
        let up = c.as_str().to_uppercase();
        println!("export {up}_QUEUE_URL={}", queues.get(c));
        println!("export {up}_DLQ_URL={}", dlqs.get(c));
    }
    Ok(())
}

fn aws_sdk_sqs_client(sdk: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(sdk)
}

fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s = format!("{s}: {inner}");
        src = inner.source();
    }
    s.lines().next().unwrap_or_default().to_owned()
}

pub async fn run(duration: Option<u64>, schedule_period: u64) -> Result<(), String> {
    require_emulator()?;
    let settings = Settings::from_env().map_err(|e| e.to_string())?;
    let consumer_cfg = ConsumerConfig::from_env().map_err(|e| e.to_string())?;
    let scheduler_cfg = SchedulerConfig::from_env().map_err(|e| e.to_string())?;
    let sdk = reminders::aws::sdk_config().await;
    let adapters = Adapters::new(&sdk, &settings);
    let providers =
        reminders::providers::from_lookup(env, SystemClock, consumer_cfg.provider_timeout, &sdk)
            .map_err(|e| e.to_string())?;
    let ports = PortSet {
        clock: SystemClock,
        reminders: adapters.reminders,
        ledger: adapters.ledger,
        gate: adapters.gate,
        queue: adapters.queues,
        dead_letters: adapters.dead_letters,
        providers,
    };
    let consumer = Consumer::new(
        ports.clone(),
        consumer_cfg,
        settings.queue_urls.clone(),
        rand_seed(),
    );
    let scheduler = Scheduler::new(ports, scheduler_cfg);
    let cfg = LocalConfig {
        schedule_period: Duration::from_secs(schedule_period.max(1)),
        ..LocalConfig::default()
    };
    let stop = match duration {
        Some(secs) => Stop::For(Duration::from_secs(secs)),
        None => Stop::Idle {
            at_most: Duration::from_secs(24 * 3600),
        },
    };
    let report = local::run(&scheduler, &consumer, &settings.queue_urls, &cfg, stop)
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "scheduler runs {}, reminders enqueued {}, batches {}{}",
        report.scheduler_runs,
        report.enqueued,
        report.batches,
        if report.idle { ", idle" } else { "" }
    );
    for c in Channel::ALL {
        let m = report.metrics.get(c);
        println!(
            "{c:<6} delivered {} dead {} expired {} cancelled {} deferred {} duplicates {}",
            m.delivered,
            m.dead_total(),
            m.expired,
            m.cancelled,
            m.deferred_gate + m.deferred_provider + m.retried,
            m.duplicates_suppressed
        );
    }
    Ok(())
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
