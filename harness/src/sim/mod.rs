//! The embedded pipeline: the real scheduler and consumer on in-memory ports, a virtual clock
//! and a simulated provider ([`provider`]), advanced one virtual second at a time. The same
//! seed gives the same run, byte for byte: time and randomness come only from the ports, and
//! it runs on one thread.
//!
//! Each virtual second: the scheduler runs on its period, then each channel's event source
//! mapping takes up to `batches_per_second` batches of ten through the consumer. At the end,
//! the redrive library's read-only DLQ look accounts for messages the queues' redrive policy
//! moved (crash loops).
//!
//! This file is the run itself. `world.rs` wires the ports and the real scheduler and
//! consumer on them, `load.rs` seeds the load and reads back what became of it, and
//! [`report`] counts.

pub mod chart;
mod config;
pub mod latency;
mod load;
pub mod plan;
pub mod provider;
pub mod recipients;
pub mod report;
mod world;

use std::time::Duration;

pub use config::{deployed, SeriesLoad, SimConfig, DEFAULT_DENSITY_PER_SEC, EPOCH};
pub use load::{load_series, planned};
use load::{outcomes, seed_reminders};
pub use provider::{Profile, SimProvider};
use reminders::consumer::Metrics;
use reminders::domain::{Channel, PerChannel};
use reminders::scheduler::Share;
pub use report::{Sample, SimReport};
use world::{world, World};

/// Run the simulation; `progress(done, total)` is called once per virtual minute.
pub async fn simulate(cfg: &SimConfig, mut progress: impl FnMut(u64, u64)) -> SimReport {
    let w = world(cfg);
    seed_reminders(&w, cfg).await;
    let mut metrics = PerChannel::<Metrics>::default();
    let mut samples = Vec::new();
    let mut so_far = Outcomes4::default();
    let mut drained_at = None;
    let total = planned(cfg);
    let mut t = 0u64;
    // The run may take `max_time` past the last due time.
    let give_up = cfg.window.as_secs() + cfg.max_time.as_secs();
    while t <= give_up {
        if t.is_multiple_of(60) {
            run_schedules(&w).await;
        }

        for channel in Channel::ALL {
            for _ in 0..cfg.batches_per_second {
                if !esm_poll(&w, channel, &mut metrics).await {
                    break;
                }
            }
        }
        let now_totals = outcome_totals(&metrics);
        if t.is_multiple_of(10) {
            let since = Outcomes4::since(now_totals, so_far);
            samples.push(sample(&w, t, since).await);
            so_far = now_totals;
            if t >= cfg.window.as_secs() && idle(&w).await && made_all(&w, cfg).await {
                drained_at = Some(t);
                break;
            }
        }
        if t.is_multiple_of(60) {
            progress(finished(&metrics).min(total), total);
        }
        w.clock.advance(Duration::from_secs(1));
        t += 1;
    }
    progress(total, total);
    report::build(cfg, &w, metrics, samples, drained_at).await
}

/// Every schedule's run of this minute, each over its share, each on its own run clock with
/// the function's deadline (they run side by side on AWS). A failed run is retried by the
/// next one, as EventBridge Scheduler would.
async fn run_schedules(w: &World) -> u64 {
    let timeout = Duration::from_secs(reminders::scheduler::config::FUNCTION_TIMEOUT_SECS);
    let mut enqueued = 0;
    for index in 0..w.parallelism {
        let Ok(share) = Share::new(index, w.parallelism) else {
            continue;
        };
        w.run_clock.start_run();
        let deadline = reminders::clock::Clock::now(&w.clock).plus(timeout);
        if let Ok(report) = w.scheduler.run_share(Some(deadline), share).await {
            enqueued += u64::from(report.enqueued);
        }
        if index == 0 {
            // The first share's function makes the series' occurrences after its scan, as
            // deployed (its own DynamoDB time is not modelled).
            let now = reminders::clock::Clock::now(&w.clock);
            let _ = reminders::series::make_due(
                &*w.store,
                &*w.ledger,
                now,
                reminders::domain::Retention::default(),
            )
            .await;
        }
    }
    enqueued
}

/// Reminders the deployed scheduler enqueues in one minute (one run of each schedule) at
/// the modelled latency, with `cfg.reminders` all due at once: its ceiling.
pub async fn enqueued_per_minute(cfg: &SimConfig) -> u64 {
    let cfg = SimConfig {
        window: Duration::from_secs(1),
        ..cfg.clone()
    };
    let w = world(&cfg);
    seed_reminders(&w, &cfg).await;
    run_schedules(&w).await
}

fn finished(m: &PerChannel<Metrics>) -> u64 {
    Channel::ALL
        .iter()
        .map(|c| {
            let m = m.get(*c);
            u64::from(m.delivered + m.expired + m.dead_total() + m.cancelled)
        })
        .sum()
}

async fn esm_poll(w: &World, channel: Channel, metrics: &mut PerChannel<Metrics>) -> bool {
    let polled = crate::local::poll_once(&w.consumer, &w.urls, channel, 10, 180, None).await;
    let Ok(Some(out)) = polled else {
        return false;
    };
    for c in Channel::ALL {
        metrics.get_mut(c).merge(out.metrics.get(c).clone());
    }
    true
}

/// Deliveries by how they ended: delivered, expired, dead (failures: a recipient's choice is
/// not one), cancelled.
#[derive(Debug, Clone, Copy, Default)]
struct Outcomes4([u64; 4]);

impl Outcomes4 {
    fn since(now: Self, before: Self) -> Self {
        Self(std::array::from_fn(|i| now.0[i] - before.0[i]))
    }
}

fn outcome_totals(m: &PerChannel<Metrics>) -> Outcomes4 {
    let mut o = Outcomes4::default();
    for c in Channel::ALL {
        let m = m.get(c);
        o.0[0] += u64::from(m.delivered);
        o.0[1] += u64::from(m.expired);
        o.0[2] += u64::from(m.dead_needing_operator());
        o.0[3] += u64::from(m.cancelled);
    }
    o
}

async fn sample(w: &World, t: u64, since: Outcomes4) -> Sample {
    let now = reminders::clock::Clock::now(&w.clock);
    Sample {
        t_secs: t,
        depth: PerChannel::from_fn(|c| w.queue.len(c) as u64),
        oldest_age_secs: PerChannel::from_fn(|c| {
            w.queue
                .oldest_ready_at(c)
                .map_or(0, |at| now.since(at).as_secs())
        }),
        delivered: since.0[0],
        expired: since.0[1],
        dead: since.0[2],
        cancelled: since.0[3],
    }
}

/// No series is still waiting for the maker (one that fell behind makes after the window).
async fn made_all(w: &World, cfg: &SimConfig) -> bool {
    if cfg.series.is_none() {
        return true;
    }
    let far = EPOCH.plus(cfg.window).plus(cfg.max_time);
    // One whose last occurrence is made waits only to be marked ended: nothing owed.
    matches!(
        reminders::ports::SeriesStore::series_due(&*w.store, far, u32::MAX).await,
        Ok(due) if due.iter().all(|s| s.next_after(s.made_through).is_none())
    )
}

async fn idle(w: &World) -> bool {
    matches!(
        crate::local::nothing_pending(w.consumer.ports()).await,
        Ok(true)
    )
}
