//! What one simulation runs: the deployed configuration (the template's defaults, one
//! source), the load, the providers' profiles and the seed.

use std::time::Duration;

use reminders_core::clock::Timestamp;
use reminders_core::consumer::ConsumerConfig;
use reminders_core::policy::RetryPolicy;
use reminders_core::scheduler::SchedulerConfig;

use super::latency::LatencyModel;
use reminders_core::domain::Channel;

use super::provider::Profile;

/// The simulated epoch (virtual time starts here).
pub const EPOCH: Timestamp = Timestamp::from_millis(1_700_000_000_000);

#[derive(Debug, Clone)]
pub struct SimConfig {
    pub reminders: u32,
    /// Due times are spread uniformly over `[0, window)` from the start.
    pub window: Duration,
    pub freshness: Duration,
    pub subscribers: u32,
    /// Which channels reminders go to (round robin).
    pub channels: Vec<Channel>,
    pub seed: u64,
    pub profile: Profile,
    pub policy: RetryPolicy,
    /// Each channel's event source mapping (`ConsumerMaxConcurrency`, `ConsumerBatchSize`),
    /// as deployed unless told otherwise; what it takes a second follows from the batches'
    /// modelled duration (mapping.rs).
    pub consumer_max_concurrency: u32,
    pub batch_size: u32,
    /// Provisioned mode (`ConsumerMinPollers`, `ConsumerMaxPollers`): 0 minimum pollers is
    /// standard mode, as deployed; 2 or more, the mapping keeps that many pollers ready and
    /// `consumer_max_concurrency` no longer applies (mapping.rs).
    pub min_pollers: u32,
    pub max_pollers: u32,
    /// The provider's latency per send (p50; one in fifty takes four times it).
    pub provider_latency_ms: f64,
    /// Due-index shards (`DueShards`): one DynamoDB partition key each.
    pub due_shards: u32,
    /// How the tables are billed (on demand as deployed).
    pub tables: super::capacity::TableMode,
    /// The account's Lambda concurrency (its default quota unless told otherwise).
    pub account_concurrency: u32,
    /// Give up this long (virtual time) after the window closes.
    pub max_time: Duration,
    /// The scheduler's schedules (one share of the due index each) and its per-run backstop,
    /// as deployed unless told otherwise.
    pub scheduler_parallelism: u32,
    pub max_per_run: u32,
    /// Modelled AWS latency and scheduler CPU, so the scheduler's ceiling shows.
    pub latency: LatencyModel,
    /// The consumer's breaker (deployed unless told otherwise).
    pub breaker: reminders_core::policy::BreakerPolicy,
    /// Subscribers with opt-outs and quiet hours ([`recipients`]); none by default.
    pub recipient_rules: bool,
    /// Recurring series beside the one-off reminders (none by default): their occurrences
    /// inside the window are the load, made by the scheduler's maker as deployed.
    pub series: Option<SeriesLoad>,
}

/// `count` subscribers, each with one series of `rule` in `zone`, starting at the epoch and
/// ending with the window (`remindctl demo --series N --rule …`).
#[derive(Debug, Clone)]
pub struct SeriesLoad {
    pub count: u32,
    pub rule: String,
    pub zone: String,
}

/// What the stack deploys, from the one source the template is tested against: the
/// scheduler's and consumer's defaults and the number of schedules.
pub fn deployed() -> (SchedulerConfig, ConsumerConfig, u32) {
    let consumer = ConsumerConfig {
        emit_metrics: false,
        ..ConsumerConfig::default()
    };
    let parallelism = reminders_core::scheduler::config::DEFAULT_PARALLELISM;
    (SchedulerConfig::default(), consumer, parallelism)
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            reminders: 10_000,
            window: Duration::from_secs(1800),
            freshness: Duration::from_secs(3600),
            subscribers: 2_000,
            channels: Channel::ALL.to_vec(),
            seed: 1,
            profile: Profile::default(),
            policy: RetryPolicy::default(),
            consumer_max_concurrency: reminders_core::consumer::config::MAPPING_MAX_CONCURRENCY,
            batch_size: reminders_core::consumer::config::MAPPING_BATCH_SIZE,
            min_pollers: reminders_core::consumer::config::MAPPING_MIN_POLLERS,
            max_pollers: reminders_core::consumer::config::MAPPING_MAX_POLLERS,
            provider_latency_ms: super::limits::DEFAULT_PROVIDER_LATENCY_MS,
            due_shards: reminders_core::domain::DEFAULT_DUE_SHARDS,
            tables: super::capacity::TableMode::OnDemand,
            account_concurrency: super::limits::lambda::ACCOUNT_CONCURRENCY,
            max_time: Duration::from_secs(12 * 3600),
            scheduler_parallelism: deployed().2,
            max_per_run: deployed().0.max_per_run,
            latency: LatencyModel::default(),
            breaker: deployed().1.breaker,
            recipient_rules: false,
            series: None,
        }
    }
}

/// The demo's default load: reminders per second of the due window (10,000 over 30 minutes).
/// A run with more reminders spreads them over a longer window at this density unless told
/// otherwise, so that the same providers and failure profile see the same load.
pub const DEFAULT_DENSITY_PER_SEC: f64 = 10_000.0 / 1_800.0;

impl SimConfig {
    /// The due window that keeps [`DEFAULT_DENSITY_PER_SEC`] for `reminders` (30 minutes at
    /// least).
    pub fn default_window(reminders: u32) -> Duration {
        let secs = (f64::from(reminders) / DEFAULT_DENSITY_PER_SEC).ceil() as u64;
        Duration::from_secs(secs.max(1_800))
    }
}
