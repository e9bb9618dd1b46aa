//! Which stage held the work back: for each stage on the way (the scheduler, the due index,
//! the reminders table, the queue, the consumer, the ledger, the provider) its peak
//! utilisation, the seconds it was the limit, and the throttles it took. The bottleneck is
//! the stage that was the limit longest.
//!
//! "The limit" per stage: the scheduler, a minute in which a run stopped at its deadline or
//! its `SchedulerMaxPerRun` (60 s); a table, a second with a throttle (and the due index, a
//! minute for each run whose shard query failed throttled: its reminders wait for the next
//! run); the consumer, a second
//! its mapping's concurrency was spent with messages still visible; the provider, a second it
//! answered 429 for its throughput. The queue has no modelled limit (SQS standard).

use std::fmt;

use serde::Serialize;

use super::capacity::{Dynamo, Table, TableStats};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Scheduler,
    DueIndex,
    RemindersTable,
    Queue,
    Consumer,
    Ledger,
    Provider,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Scheduler => "scheduler",
            Stage::DueIndex => "due index",
            Stage::RemindersTable => "reminders table",
            Stage::Queue => "queue",
            Stage::Consumer => "consumer",
            Stage::Ledger => "ledger",
            Stage::Provider => "provider",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageStats {
    pub stage: Stage,
    /// The busiest moment's share of its capacity (1.0: all of it); none where no limit is
    /// modelled (the queue).
    pub peak_utilisation: Option<f64>,
    /// Seconds this stage was the limit.
    pub limit_secs: u64,
    /// Throttles it took (DynamoDB attempts refused, Lambda invocations refused for
    /// concurrency, the provider's 429s).
    pub throttles: u64,
    /// Its capacity as modelled, in words.
    pub capacity: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StageReport {
    pub stages: Vec<StageStats>,
    /// The stage that was the limit longest (none if no stage ever was).
    pub bottleneck: Option<Stage>,
    /// The due-index shard that throttled most, if any did.
    pub hottest_due_shard: Option<u64>,
    /// Per record the consumer took: DynamoDB requests and modelled work (ms, its calls and
    /// the provider's latency), counted on its real path.
    pub consumer_requests_per_record: f64,
    pub consumer_ms_per_record: f64,
    /// Seconds the consumer was the limit while its mapping was still scaling up (300
    /// batches more a minute in standard mode): what no `ConsumerMaxConcurrency` moves, and
    /// what provisioned mode (`ConsumerMinPollers`) does.
    pub consumer_scaling_secs: u64,
    /// A scheduler run stopped at `SchedulerMaxPerRun` rather than its deadline.
    pub scheduler_capped: bool,
}

/// What the simulation loop counts as it goes (DynamoDB counts its own).
#[derive(Debug, Default)]
pub struct Tracker {
    pub scheduler_peak: f64,
    /// Minutes (in seconds) a due-index shard waited for the next run after its query was
    /// throttled.
    pub due_index_wait_secs: u64,
    pub scheduler_limit_secs: u64,
    pub consumer_peak: f64,
    pub consumer_limit_secs: u64,
    /// Of those, seconds its mapping had not yet scaled to its maximum concurrency.
    pub consumer_scaling_secs: u64,
    /// A scheduler run stopped at `SchedulerMaxPerRun`.
    pub scheduler_capped: bool,
    /// Invocations the account's concurrency refused (the mapping wanted more than was left).
    pub consumer_throttles: u64,
    pub provider_peak: f64,
    pub provider_limit_secs: u64,
    pub provider_throttles: u64,
    pub peak_queue_depth: u64,
    /// The consumer's batches: records, DynamoDB requests and modelled milliseconds of work.
    pub consumer_records: u64,
    pub consumer_requests: u64,
    pub consumer_ms: f64,
}

/// The capacities, in words, for the report.
pub struct Capacities {
    pub scheduler: String,
    pub due_index: String,
    pub tables: String,
    pub consumer: String,
    pub provider: String,
}

pub fn build(t: &Tracker, dynamo: &Dynamo, caps: Capacities) -> StageReport {
    let table = |stage, stats: TableStats, capacity: String| StageStats {
        stage,
        peak_utilisation: Some(round(stats.peak_utilisation)),
        limit_secs: stats.throttled_secs,
        throttles: stats.throttles,
        capacity,
    };
    let index = dynamo.stats(Table::DueIndex);
    let hottest_due_shard = index.hottest_key;
    let due_wait = t.due_index_wait_secs;
    let stages = vec![
        StageStats {
            stage: Stage::Scheduler,
            peak_utilisation: Some(round(t.scheduler_peak)),
            limit_secs: t.scheduler_limit_secs,
            throttles: 0,
            capacity: caps.scheduler,
        },
        StageStats {
            limit_secs: index.throttled_secs + due_wait,
            ..table(Stage::DueIndex, index, caps.due_index)
        },
        table(
            Stage::RemindersTable,
            dynamo.stats(Table::Reminders),
            caps.tables.clone(),
        ),
        StageStats {
            stage: Stage::Queue,
            peak_utilisation: None,
            limit_secs: 0,
            throttles: 0,
            capacity: format!(
                "SQS standard: no throughput limit (peak depth {})",
                t.peak_queue_depth
            ),
        },
        StageStats {
            stage: Stage::Consumer,
            peak_utilisation: Some(round(t.consumer_peak)),
            limit_secs: t.consumer_limit_secs,
            throttles: t.consumer_throttles,
            capacity: caps.consumer,
        },
        table(Stage::Ledger, dynamo.stats(Table::Ledger), caps.tables),
        StageStats {
            stage: Stage::Provider,
            peak_utilisation: Some(round(t.provider_peak)),
            limit_secs: t.provider_limit_secs,
            throttles: t.provider_throttles,
            capacity: caps.provider,
        },
    ];
    let bottleneck = stages
        .iter()
        .filter(|s| s.limit_secs > 0)
        .max_by(|a, b| {
            (a.limit_secs, a.peak_utilisation.unwrap_or(0.0))
                .partial_cmp(&(b.limit_secs, b.peak_utilisation.unwrap_or(0.0)))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .map(|s| s.stage);
    let per = |x: f64| round(x / t.consumer_records.max(1) as f64);
    StageReport {
        stages,
        bottleneck,
        hottest_due_shard,
        consumer_requests_per_record: per(t.consumer_requests as f64),
        consumer_ms_per_record: per(t.consumer_ms),
        consumer_scaling_secs: t.consumer_scaling_secs,
        scheduler_capped: t.scheduler_capped,
    }
}

fn round(x: f64) -> f64 {
    (x * 1_000.0).round() / 1_000.0
}

impl StageReport {
    pub fn stage(&self, stage: Stage) -> Option<&StageStats> {
        self.stages.iter().find(|s| s.stage == stage)
    }
}

impl fmt::Display for StageReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<16}{:>6}{:>10}{:>11}  capacity as modelled",
            "stage", "peak", "limit s", "throttles"
        )?;
        for s in &self.stages {
            let peak = s
                .peak_utilisation
                .map_or("—".to_owned(), |p| format!("{:.0}%", p * 100.0));
            writeln!(
                f,
                "{:<16}{:>6}{:>10}{:>11}  {}",
                s.stage.as_str(),
                peak,
                s.limit_secs,
                s.throttles,
                s.capacity
            )?;
        }
        match self.bottleneck {
            Some(b) => {
                write!(f, "bottleneck: {}", b.as_str())?;
                if let (Stage::DueIndex, Some(k)) = (b, self.hottest_due_shard) {
                    write!(f, " (hottest partition: due_shard {k})")?;
                }
                writeln!(f)
            }
            None => writeln!(f, "bottleneck: none (no stage was ever the limit)"),
        }?;
        write!(
            f,
            "{}",
            super::lines::hanging(
                "",
                "peak: the busiest moment's share of the stage's capacity · limit s: seconds the \
                 stage held work back at its capacity · throttles: requests refused for capacity \
                 (DynamoDB, Lambda concurrency, the provider's 429s beyond its throughput) · bottleneck: the stage \
                 that held work back longest",
            )
        )
    }
}
