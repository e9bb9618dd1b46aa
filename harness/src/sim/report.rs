//! What a simulation found: the numbers an operator plans with, as text or one JSON line
//! (no wall-clock time, no paths: the same seed gives the same bytes).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::{SimConfig, World};
use reminders_core::consumer::Metrics;
use reminders_core::domain::{Channel, DeadReason, PerChannel};

/// One point of the time series (every ten virtual seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub t_secs: u64,
    pub depth: PerChannel<u64>,
    pub oldest_age_secs: PerChannel<u64>,
    /// Deliveries since the previous sample.
    pub delivered: u64,
    /// Deliveries that expired (went stale), died, or were cancelled since the previous one.
    pub expired: u64,
    /// Deaths that are failures: the recipient's choices (opted out, suppressed, quiet hours
    /// outlasting freshness) are not counted here, as the EMF `dead_total` leaves them out.
    pub dead: u64,
    pub cancelled: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    pub p50: i64,
    pub p95: i64,
    pub p99: i64,
}

#[derive(Debug, Default)]
pub(crate) struct Outcomes {
    pub delivered: u64,
    pub expired: u64,
    pub cancelled: u64,
    pub pending: u64,
    pub dead: BTreeMap<DeadReason, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    pub seed: u64,
    pub reminders: u64,
    pub delivered: u64,
    /// Delivered within a minute of their due time.
    pub on_time: u64,
    pub expired: u64,
    pub cancelled: u64,
    /// Neither final nor dead when the simulation stopped.
    pub pending: u64,
    pub dead: BTreeMap<DeadReason, u64>,
    pub provider_calls: u64,
    /// Delivery keys the recipient saw more than once (0 with an idempotent provider).
    pub duplicates: u64,
    pub lateness_ms: Percentiles,
    pub peak_queue_age_s: BTreeMap<Channel, u64>,
    /// Virtual seconds until nothing was left to do (none if it never drained).
    pub drain_time_s: Option<u64>,
    /// Delivered before going stale, as a fraction of all reminders.
    pub fresh_fraction: f64,
    /// Each stage's utilisation, time at the limit and throttles, and the bottleneck.
    pub stages: super::stages::StageReport,
    #[serde(skip)]
    pub samples: Vec<Sample>,
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        0
    } else {
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }
}

pub(super) async fn build(
    cfg: &SimConfig,
    w: &World,
    metrics: PerChannel<Metrics>,
    samples: Vec<Sample>,
    drained_at: Option<u64>,
) -> SimReport {
    let (store, ledger, dlq, provider) = w.parts();
    let o = super::outcomes(store, ledger, dlq, cfg).await;
    let mut lateness: Vec<i64> = Channel::ALL
        .iter()
        .flat_map(|c| metrics.get(*c).lateness_ms.iter().copied())
        .collect();
    lateness.sort_unstable();
    let peak_queue_age_s = Channel::ALL
        .iter()
        .map(|c| {
            let peak = samples
                .iter()
                .map(|s| *s.oldest_age_secs.get(*c))
                .max()
                .unwrap_or(0);
            (*c, peak)
        })
        .collect();
    let reminders = super::planned(cfg);
    SimReport {
        seed: cfg.seed,
        reminders,
        delivered: o.delivered,
        on_time: lateness.iter().filter(|l| **l <= 60_000).count() as u64,
        expired: o.expired,
        cancelled: o.cancelled,
        pending: o.pending,
        dead: o.dead,
        provider_calls: provider.calls(),
        duplicates: provider.duplicates(),
        lateness_ms: Percentiles {
            p50: percentile(&lateness, 50.0),
            p95: percentile(&lateness, 95.0),
            p99: percentile(&lateness, 99.0),
        },
        peak_queue_age_s,
        drain_time_s: drained_at,
        fresh_fraction: if reminders == 0 {
            0.0
        } else {
            (o.delivered as f64 / reminders as f64 * 10_000.0).round() / 10_000.0
        },
        stages: Default::default(),
        samples,
    }
}

/// What a death of the simulation means, in the words of the profile that caused it.
fn gloss(reason: DeadReason) -> Option<&'static str> {
    Some(match reason {
        DeadReason::Rejected => {
            "refused for good by the provider: the profile's permanent failures"
        }
        DeadReason::AttemptsExhausted => "5xx and timeouts outlasted the attempt budget",
        DeadReason::ThrottleExhausted => "429s outlasted the throttle budget",
        DeadReason::Ambiguous => {
            "timed out on a provider that ignores idempotency keys: maybe sent, reconcile by hand"
        }
        _ => return None,
    })
}

impl SimReport {
    /// The report as one JSON line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |n: u64| 100.0 * n as f64 / self.reminders.max(1) as f64;
        writeln!(f, "reminders           {}", self.reminders)?;
        writeln!(
            f,
            "delivered           {} ({:.1}%)",
            self.delivered,
            pct(self.delivered)
        )?;
        writeln!(
            f,
            "  on time (≤ 60 s)  {} ({:.1}%)",
            self.on_time,
            pct(self.on_time)
        )?;
        writeln!(
            f,
            "  lateness          p50 {:.1} s · p95 {:.1} s · p99 {:.1} s",
            self.lateness_ms.p50 as f64 / 1000.0,
            self.lateness_ms.p95 as f64 / 1000.0,
            self.lateness_ms.p99 as f64 / 1000.0
        )?;
        writeln!(
            f,
            "expired (stale)     {} ({:.1}%)",
            self.expired,
            pct(self.expired)
        )?;
        // The recipient's own rules (an opt-out, a suppressed address, quiet hours outlasting
        // freshness) apart from failures: nothing for an operator to fix.
        let (choices, failures): (Vec<_>, Vec<_>) = self
            .dead
            .iter()
            .partition(|(r, _)| r.is_recipients_choice());
        let sum = |l: &[(&DeadReason, &u64)]| l.iter().map(|(_, n)| **n).sum::<u64>();
        writeln!(f, "dead                {}", sum(&failures))?;
        for (reason, n) in &failures {
            write!(f, "  {:<20}{n}", reason.as_str())?;
            match gloss(**reason) {
                Some(why) => writeln!(f, "  ({why})")?,
                None => writeln!(f)?,
            }
        }
        if !choices.is_empty() {
            writeln!(
                f,
                "recipient's choice  {} (not sent, by the recipient's rules)",
                sum(&choices)
            )?;
            for (reason, n) in &choices {
                writeln!(f, "  {:<20}{n}", reason.as_str())?;
            }
        }
        if self.pending > 0 {
            writeln!(f, "still pending       {}", self.pending)?;
        }
        writeln!(
            f,
            "provider calls      {} for {} deliveries ({:.2} per delivery)",
            self.provider_calls,
            self.delivered,
            self.provider_calls as f64 / self.delivered.max(1) as f64
        )?;
        writeln!(f, "duplicates          {}", self.duplicates)?;
        for (c, age) in &self.peak_queue_age_s {
            writeln!(f, "peak queue age      {:<6} {age} s", c.as_str())?;
        }
        match self.drain_time_s {
            Some(t) => writeln!(f, "drained after       {t} s of simulated time")?,
            None => writeln!(f, "did not drain before the time limit")?,
        }
        write!(f, "{}", self.stages)
    }
}
