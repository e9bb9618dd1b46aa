//! Each channel's event source mapping as deployed: at most `ConsumerMaxConcurrency` batches
//! at once (and no more than its scaling has reached: five at first, 300 more a minute while
//! messages wait), all of them within the account's unreserved concurrency, each batch of
//! `ConsumerBatchSize` lasting what its records cost: the consumer's own DynamoDB calls
//! ([`super::metered`]) and the provider's latency, spread over the records it runs at once.
//! In provisioned mode (`ConsumerMinPollers` 2 or more) the minimum pollers are kept ready:
//! the mapping starts at their concurrency (ten batches a poller), adds 1,000 a minute while
//! messages wait, up to its maximum pollers' concurrency; `ConsumerMaxConcurrency` does not
//! apply (the two are mutually exclusive on AWS).
//!
//! A fluid model: each virtual second grants a channel `concurrency` seconds of batches; each
//! batch spends its modelled duration; a batch that outlasts the grant is paid from the next
//! second's. Limits: [`super::limits::lambda`].

use reminders_core::consumer::Metrics;
use reminders_core::domain::{Channel, PerChannel};
use reminders_core::ports::DeliveryQueue;

use super::limits::lambda;
use super::stages::Tracker;
use super::{SimConfig, World};

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Mapping {
    /// Batch-seconds left (negative: owed by a batch that outlasted its second).
    budget: f64,
    /// Batches its scaling has reached (never below its [`Scaling::start`]).
    scaled: f64,
}

/// How a channel's mapping scales, in batches at once (concurrent invocations).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scaling {
    /// Provisioned mode: its minimum and maximum pollers, as AWS accepts them.
    pub pollers: Option<(u32, u32)>,
    /// Where it starts when messages arrive (and returns to when the queue is empty).
    pub start: u32,
    /// Batches it adds a minute while messages wait.
    pub per_min: u32,
    /// The most it runs.
    pub max: u32,
}

/// The mapping `cfg` deploys: standard mode unless `min_pollers` is set.
pub fn scaling(cfg: &SimConfig) -> Scaling {
    if cfg.min_pollers == 0 {
        let max = cfg
            .consumer_max_concurrency
            .clamp(
                lambda::ESM_MAX_CONCURRENCY_RANGE.0,
                lambda::ESM_MAX_CONCURRENCY_RANGE.1,
            )
            .min(lambda::ESM_MAX_BATCHES);
        return Scaling {
            pollers: None,
            start: lambda::ESM_START_BATCHES.min(max),
            per_min: lambda::ESM_SCALE_PER_MIN,
            max,
        };
    }
    let min = cfg.min_pollers.clamp(
        lambda::ESM_MIN_POLLERS_RANGE.0,
        lambda::ESM_MIN_POLLERS_RANGE.1,
    );
    let most = cfg
        .max_pollers
        .clamp(
            lambda::ESM_MAX_POLLERS_RANGE.0,
            lambda::ESM_MAX_POLLERS_RANGE.1,
        )
        .max(min);
    let cap = lambda::ESM_PROVISIONED_MAX_CONCURRENCY;
    Scaling {
        pollers: Some((min, most)),
        start: (min * lambda::ESM_POLLER_CONCURRENCY).min(cap),
        per_min: lambda::ESM_PROVISIONED_SCALE_PER_MIN,
        max: (most * lambda::ESM_POLLER_CONCURRENCY).min(cap),
    }
}

impl Scaling {
    /// In words, for the report.
    pub fn describe(&self) -> String {
        match self.pollers {
            None => format!(
                "standard mode: {} batches at first, {} more a minute, {} at most",
                self.start, self.per_min, self.max
            ),
            Some((min, max)) => format!(
                "provisioned mode: {min}-{max} pollers, {} batches at first, {} more a minute, \
                 {} at most",
                self.start, self.per_min, self.max
            ),
        }
    }
}

/// Executions the consumers of every channel share: the account's, less the reservations
/// (the scheduler reserves one per schedule, redrive one; template.yaml).
pub fn consumer_pool(cfg: &SimConfig) -> u32 {
    let reserved = cfg.scheduler_parallelism + 1;
    cfg.account_concurrency.saturating_sub(reserved).max(1)
}

/// One virtual second of every channel's mapping.
pub(super) async fn second(
    w: &World,
    cfg: &SimConfig,
    mappings: &mut PerChannel<Mapping>,
    metrics: &mut PerChannel<Metrics>,
    tracker: &mut Tracker,
) {
    let scaling = scaling(cfg);
    let max = scaling.max;
    let mut want = PerChannel::<u32>::default();
    let mut depth_total = 0;
    for c in Channel::ALL {
        let d = w.queue.depth(c).await.unwrap_or_default();
        depth_total += d.visible + d.delayed + d.in_flight;
        let m = mappings.get_mut(c);
        if d.visible == 0 && m.budget >= 0.0 {
            // Nothing waiting: it scales back to where it starts (its first five, or its
            // minimum pollers).
            *m = Mapping::default();
            continue;
        }
        m.scaled = m.scaled.max(f64::from(scaling.start));
        *want.get_mut(c) = max.min(m.scaled as u32);
    }
    tracker.peak_queue_depth = tracker.peak_queue_depth.max(depth_total);
    let wanted: u32 = Channel::ALL.iter().map(|c| *want.get(*c)).sum();
    let pool = consumer_pool(cfg);
    if wanted > pool {
        tracker.consumer_throttles += u64::from(wanted - pool);
    }
    let (calls0, over0) = (w.provider.calls(), w.provider.over_throughput());
    let mut provider_rate = 0.0;
    for c in Channel::ALL {
        let granted = if wanted > pool {
            (u64::from(*want.get(c)) * u64::from(pool) / u64::from(wanted)) as u32
        } else {
            *want.get(c)
        };
        if *want.get(c) == 0 {
            continue;
        }
        provider_rate += cfg.profile.per_sec(c);
        let m = mappings.get_mut(c);
        m.budget = m.budget.min(0.0) + f64::from(granted);
        let mut used = 0.0;
        while m.budget > 0.0 {
            let Some(secs) = batch(w, cfg, c, metrics, tracker).await else {
                break;
            };
            m.budget -= secs;
            used += secs;
        }
        let util = if granted == 0 {
            1.0
        } else {
            (used / f64::from(granted)).min(1.0)
        };
        tracker.consumer_peak = tracker.consumer_peak.max(util);
        let waiting = w.queue.depth(c).await.is_ok_and(|d| d.visible > 0);
        if waiting {
            // Spent with messages still waiting: the mapping scales (300 a minute, or 1,000
            // in provisioned mode).
            tracker.consumer_limit_secs += 1;
            if (m.scaled as u32) < max {
                tracker.consumer_scaling_secs += 1;
            }
            m.scaled = (m.scaled + f64::from(scaling.per_min) / 60.0).min(f64::from(max));
        }
    }
    let (calls, over) = (
        w.provider.calls() - calls0,
        w.provider.over_throughput() - over0,
    );
    if over > 0 {
        tracker.provider_limit_secs += 1;
        tracker.provider_throttles += over;
    }
    if provider_rate > 0.0 {
        let accepted = (calls - over) as f64;
        tracker.provider_peak = tracker
            .provider_peak
            .max((accepted / provider_rate).min(1.0));
    }
}

/// One batch through the consumer: its modelled duration in seconds, or none if the queue
/// had nothing visible.
async fn batch(
    w: &World,
    cfg: &SimConfig,
    channel: Channel,
    metrics: &mut PerChannel<Metrics>,
    tracker: &mut Tracker,
) -> Option<f64> {
    w.meter.start();
    let calls = w.provider.calls();
    // QueueVisibilityTimeoutSeconds as deployed.
    let visibility = 180;
    let polled = crate::mapping::Mapping::new(&w.urls, channel, cfg.batch_size.max(1), visibility)
        .poll(&w.consumer, None)
        .await;
    let Ok(Some(out)) = polled else {
        return None;
    };
    for c in Channel::ALL {
        metrics.get_mut(c).merge(out.metrics.get(c).clone());
    }
    for _ in calls..w.provider.calls() {
        w.meter
            .charge(cfg.provider_latency_ms, 4.0 * cfg.provider_latency_ms);
    }
    let (ms, requests) = w.meter.spent();
    tracker.consumer_records += out.records.len() as u64;
    tracker.consumer_requests += requests;
    tracker.consumer_ms += ms;
    // Records run concurrently inside a batch, up to the consumer's own bound.
    let at_once = out.records.len().clamp(1, w.consumer_concurrency) as f64;
    Some((ms / at_once + lambda::INVOKE_OVERHEAD_MS) / 1_000.0)
}
