//! Capacity planning on the simulation engine: with this throughput, policy and outage, what
//! fraction arrives before its freshness deadline, and when does the queue drain? The
//! arithmetic estimate is printed beside the simulated answer.

use std::time::Duration;

use serde::Serialize;

pub use super::params::Params;
use super::{simulate, Profile, SimConfig, SimReport};
use reminders_core::domain::Channel;
use reminders_core::policy::RetryPolicy;

#[derive(Debug, Clone)]
pub struct PlanInput {
    pub reminders: u32,
    /// Recurring series beside (or instead of) the reminders: their occurrences in the window.
    pub series: Option<super::SeriesLoad>,
    /// Due times spread over this many seconds (0: all due at once).
    pub due_spread_secs: u64,
    /// Sends per second the provider accepts.
    pub throughput_per_sec: f64,
    /// Fraction of first attempts that time out (and are retried with the same key).
    pub timeout_rate: f64,
    pub freshness_secs: u64,
    pub outage: Option<(u64, u64)>,
    pub seed: u64,
    /// The deployed parameters (template.yaml's names), as deployed unless told otherwise.
    pub params: Params,
    /// The provider's latency per send, in milliseconds.
    pub provider_latency_ms: f64,
    /// The account's Lambda concurrency quota.
    pub account_concurrency: u32,
}

impl PlanInput {
    /// A plan of the stack as deployed.
    pub fn deployed(reminders: u32, throughput_per_sec: f64) -> Self {
        Self {
            reminders,
            series: None,
            due_spread_secs: 0,
            throughput_per_sec,
            timeout_rate: 0.0,
            freshness_secs: 3600,
            outage: None,
            seed: 1,
            params: Params::deployed(),
            provider_latency_ms: super::limits::DEFAULT_PROVIDER_LATENCY_MS,
            account_concurrency: super::limits::lambda::ACCOUNT_CONCURRENCY,
        }
    }
}

/// Back-of-the-envelope: every send, first or retried, costs one unit of throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub first_wave_secs: f64,
    pub retry_secs: f64,
    pub drain_secs: f64,
}

pub fn estimate(input: &PlanInput) -> Estimate {
    // Every delivery the load asks for: the reminders and the series' occurrences.
    let n = super::planned(&config(input)) as f64;
    let rate = input.throughput_per_sec.max(f64::MIN_POSITIVE);
    let first_wave_secs = n / rate;
    let retry_secs = n * input.timeout_rate / rate;
    let outage = input.outage.map_or(0.0, |(_, len)| len as f64);
    let work = first_wave_secs + retry_secs + outage;
    Estimate {
        first_wave_secs,
        retry_secs,
        drain_secs: work.max(input.due_spread_secs as f64),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub estimate: Estimate,
    pub simulated: SimReport,
}

pub async fn plan(input: &PlanInput) -> Plan {
    plan_with_progress(input, |_, _| {}).await
}

/// The same, reporting the simulation's progress (`done`, `total` deliveries settled).
pub async fn plan_with_progress(input: &PlanInput, progress: impl FnMut(u64, u64)) -> Plan {
    Plan {
        estimate: estimate(input),
        simulated: simulate(&config(input), progress).await,
    }
}

/// The simulation a plan runs: one channel at the plan's throughput, the deployed stack.
pub fn config(input: &PlanInput) -> SimConfig {
    let profile = Profile {
        push_per_sec: input.throughput_per_sec,
        rate_429: 0.0,
        rate_5xx: 0.0,
        rate_permanent: 0.0,
        rate_timeout: input.timeout_rate,
        timeout_first_attempt_only: true,
        outage_start_secs: input.outage.map(|(start, _)| start),
        outage_secs: input.outage.map_or(0, |(_, len)| len),
        outage_channel: None,
        idempotent: true,
        ..Profile::default()
    };
    // A series load runs a day of its rule unless told otherwise.
    let window = match (&input.series, input.due_spread_secs) {
        (Some(_), 0) => 86_400,
        (_, secs) => secs.max(1),
    };
    SimConfig {
        reminders: input.reminders,
        series: input.series.clone(),
        window: Duration::from_secs(window),
        freshness: Duration::from_secs(input.freshness_secs),
        subscribers: input.reminders.max(1),
        channels: vec![Channel::Push],
        seed: input.seed,
        profile,
        // The deployed policy, with the plan's freshness as its default.
        policy: RetryPolicy {
            freshness_default_secs: input.freshness_secs.max(1),
            ..RetryPolicy::default()
        },
        max_time: Duration::from_secs(24 * 3600),
        scheduler_parallelism: input.params.scheduler_parallelism,
        max_per_run: input.params.max_per_run,
        due_shards: input.params.due_shards,
        consumer_max_concurrency: input.params.consumer_max_concurrency,
        batch_size: input.params.batch_size,
        min_pollers: input.params.min_pollers,
        max_pollers: input.params.max_pollers,
        tables: input.params.tables,
        provider_latency_ms: input.provider_latency_ms,
        account_concurrency: input.account_concurrency,
        ..SimConfig::default()
    }
}
