//! The deployed parameters the planner simulates and searches, in template.yaml's names, and
//! the search's cost order over them ([`super::search`]).

use serde::Serialize;

use super::capacity::TableMode;
use super::limits::lambda;

/// The deployed parameters the planner searches, named as template.yaml names them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Params {
    pub scheduler_parallelism: u32,
    pub due_shards: u32,
    pub max_per_run: u32,
    pub consumer_max_concurrency: u32,
    pub batch_size: u32,
    /// `ConsumerMinPollers` (0: standard mode) and `ConsumerMaxPollers` (used only in
    /// provisioned mode).
    pub min_pollers: u32,
    pub max_pollers: u32,
    /// Not a template parameter: the tables are on demand (`PAY_PER_REQUEST`) as deployed.
    pub tables: TableMode,
}

impl Params {
    /// The template's defaults (one source: the code, held to the template by its test).
    pub fn deployed() -> Self {
        let (scheduler, _, parallelism) = super::deployed();
        Self {
            scheduler_parallelism: parallelism,
            due_shards: reminders_core::domain::DEFAULT_DUE_SHARDS,
            max_per_run: scheduler.max_per_run,
            consumer_max_concurrency: reminders_core::consumer::config::MAPPING_MAX_CONCURRENCY,
            batch_size: reminders_core::consumer::config::MAPPING_BATCH_SIZE,
            min_pollers: reminders_core::consumer::config::MAPPING_MIN_POLLERS,
            max_pollers: reminders_core::consumer::config::MAPPING_MAX_POLLERS,
            tables: TableMode::OnDemand,
        }
    }

    /// `Name=Value` for each template parameter, in template.yaml's names; the pollers only
    /// in provisioned mode (standard mode is the template's default).
    pub fn overrides(&self) -> String {
        let mut line = format!(
            "SchedulerParallelism={} DueShards={} SchedulerMaxPerRun={} ConsumerMaxConcurrency={} ConsumerBatchSize={}",
            self.scheduler_parallelism,
            self.due_shards,
            self.max_per_run,
            self.consumer_max_concurrency,
            self.batch_size
        );
        if self.provisioned() {
            line += &format!(
                " ConsumerMinPollers={} ConsumerMaxPollers={}",
                self.min_pollers, self.max_pollers
            );
        }
        line
    }

    /// Each channel's mapping in provisioned mode.
    pub fn provisioned(&self) -> bool {
        self.min_pollers > 0
    }

    /// The consumer's batches at once a channel, at most.
    pub fn consumer_batches(&self) -> u32 {
        if self.provisioned() {
            self.max_pollers * lambda::ESM_POLLER_CONCURRENCY
        } else {
            self.consumer_max_concurrency
        }
    }

    /// The search's cost order (smaller is cheaper; see the module's doc): provisioned mode,
    /// its always-on pollers, concurrent Lambdas, provisioned tables' write units. A relative
    /// order, not a price. Due-index shards cost nothing: the scheduler queries all 64
    /// virtual shards whatever `DueShards` says, so more of them only spread the writes.
    pub fn cost(&self) -> (bool, u32, u32, u32) {
        let tables = match self.tables {
            TableMode::OnDemand => 0,
            TableMode::Provisioned { writes, .. } => writes,
        };
        (
            self.provisioned(),
            self.min_pollers,
            self.scheduler_parallelism + self.consumer_batches(),
            tables,
        )
    }
}

/// The load the deployed defaults are the search's answer for (docs/performance.md, "How the
/// defaults were chosen"; `tests/sim/stated_load.rs` holds them equal): 10,000 reminders due over
/// one minute, a provider taking 100 sends a second (per channel: a plan simulates one) at 300 ms a
/// send (a conservative figure for SES or SNS called from Lambda; the planner's own default is
/// 50 ms), p99 lateness at most 90 s (the provider alone needs 100 s for the 10,000, so the
/// last one due goes out about 40 s late at best; the rest is the scheduler's minute and the
/// pipeline's own steps).
pub mod stated_load {
    pub const REMINDERS: u32 = 10_000;
    pub const DUE_SPREAD_SECS: u64 = 60;
    pub const THROUGHPUT_PER_SEC: f64 = 100.0;
    pub const PROVIDER_LATENCY_MS: f64 = 300.0;
    pub const TARGET_P99_S: f64 = 90.0;
}
