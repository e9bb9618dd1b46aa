//! The embedded pipeline: the real scheduler and consumer on in-memory ports, a virtual clock
//! and a simulated provider ([`provider`]), advanced one virtual second at a time. The same
//! seed gives the same run, byte for byte: time and randomness come only from the ports, and
//! it runs on one thread.
//!
//! Each virtual second: the scheduler runs on its period, then each channel's event source
//! mapping takes what its concurrency and its batches' modelled duration allow through the
//! consumer ([`mapping`]); DynamoDB's partitions and tables admit or throttle every call
//! ([`capacity`], figures in [`limits`]), and [`stages`] names the stage that held the work
//! back. At the end,
//! the redrive library's read-only DLQ look accounts for messages the queues' redrive policy
//! moved (crash loops).
//!
//! This file is the run itself. `world.rs` wires the ports and the real scheduler and
//! consumer on them, `load.rs` seeds the load and reads back what became of it, and
//! [`report`] counts. The seed enters once: each part draws from a stream of it ([`seed`]).

pub mod capacity;
pub mod chart;
mod config;
pub mod latency;
pub mod limits;
pub mod lines;
mod load;
pub mod mapping;
mod metered;
pub mod params;
pub mod plan;
pub mod provider;
pub mod recipients;
pub mod report;
pub mod search;
pub mod seed;
mod sizing;
pub mod stages;
mod world;

use std::time::Duration;

pub use config::{deployed, SeriesLoad, SimConfig, DEFAULT_DENSITY_PER_SEC, EPOCH};
pub use load::{load_series, planned};
use load::{outcomes, seed_reminders};
pub use provider::{Profile, SimProvider};
use reminders_core::consumer::Metrics;
use reminders_core::domain::{Channel, PerChannel};
use reminders_core::scheduler::Share;
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
    let mut tracker = stages::Tracker::default();
    let mut mappings = PerChannel::<mapping::Mapping>::default();
    // The run may take `max_time` past the last due time.
    let give_up = cfg.window.as_secs() + cfg.max_time.as_secs();
    while t <= give_up {
        if t.is_multiple_of(60) {
            let run = run_schedules(&w).await;
            tracker.scheduler_peak = tracker.scheduler_peak.max(run.busiest);
            if run.at_limit {
                tracker.scheduler_limit_secs += 60;
            }
            tracker.scheduler_capped |= run.capped;
            if run.query_failed {
                // A shard whose query was throttled waits for the next run: a minute.
                tracker.due_index_wait_secs += 60;
            }
        }
        mapping::second(&w, cfg, &mut mappings, &mut metrics, &mut tracker).await;
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
    let mut report = report::build(cfg, &w, metrics, samples, drained_at).await;
    report.stages = stages::build(&tracker, &w.dynamo, capacities(cfg));
    report
}

/// What a run of the schedules did: enqueued, its busiest share's use of its deadline (or of
/// its per-run cap), and whether a share stopped at either with work left.
struct Runs {
    enqueued: u64,
    busiest: f64,
    at_limit: bool,
    /// A run stopped at `SchedulerMaxPerRun` (not its deadline).
    capped: bool,
    query_failed: bool,
}

fn capacities(cfg: &SimConfig) -> stages::Capacities {
    use limits::dynamo as ddb;
    let tables = match cfg.tables {
        capacity::TableMode::OnDemand => format!(
            "on demand: {} writes/s, {} reads/s at first",
            ddb::ON_DEMAND_START_WRITES_PER_SEC,
            ddb::ON_DEMAND_START_READS_PER_SEC
        ),
        mode => mode.describe(),
    };
    stages::Capacities {
        scheduler: format!(
            "{} schedule{}, {} s deadline, at most {} reminders a run",
            cfg.scheduler_parallelism,
            if cfg.scheduler_parallelism == 1 {
                ""
            } else {
                "s"
            },
            reminders_core::scheduler::config::FUNCTION_TIMEOUT_SECS,
            cfg.max_per_run
        ),
        due_index: format!(
            "{} shards × {} writes/s",
            cfg.due_shards,
            ddb::PARTITION_WRITES_PER_SEC
        ),
        tables,
        consumer: format!(
            "{} a channel, batches of {}, {} executions for all",
            mapping::scaling(cfg).describe(),
            cfg.batch_size,
            mapping::consumer_pool(cfg)
        ),
        provider: format!(
            "{} sends/s, {} ms each",
            cfg.channels
                .iter()
                .map(|c| cfg.profile.per_sec(*c))
                .sum::<f64>(),
            cfg.provider_latency_ms
        ),
    }
}

/// Every schedule's run of this minute, each over its share, each on its own run clock with
/// the function's deadline (they run side by side on AWS). A failed run is retried by the
/// next one, as EventBridge Scheduler would.
async fn run_schedules(w: &World) -> Runs {
    let timeout = Duration::from_secs(reminders_core::scheduler::config::FUNCTION_TIMEOUT_SECS);
    let mut runs = Runs {
        enqueued: 0,
        busiest: 0.0,
        at_limit: false,
        capped: false,
        query_failed: false,
    };
    for index in 0..w.parallelism {
        let Ok(share) = Share::new(index, w.parallelism) else {
            continue;
        };
        w.run_clock.start_run();
        let deadline = reminders_core::clock::Clock::now(&w.clock).plus(timeout);
        if let Ok(report) = w.scheduler.run_share(Some(deadline), share).await {
            runs.enqueued += u64::from(report.enqueued);
            let capped = report.picked >= w.max_per_run;
            runs.at_limit |= report.stopped_at_deadline || capped;
            runs.capped |= capped;
            runs.query_failed |= report.query_failures > 0;
            let used = w.run_clock.spent().as_secs_f64() / timeout.as_secs_f64();
            let share_of_cap = f64::from(report.picked) / f64::from(w.max_per_run.max(1));
            runs.busiest = runs.busiest.max(used.max(share_of_cap).min(1.0));
        }
        if index == 0 {
            // The first share's function makes the series' occurrences after its scan, as
            // deployed (its own DynamoDB time is not modelled).
            let now = reminders_core::clock::Clock::now(&w.clock);
            let _ = reminders_core::series::make_due(
                &*w.store,
                &*w.ledger,
                now,
                reminders_core::domain::Retention::default(),
            )
            .await;
        }
    }
    runs
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
    run_schedules(&w).await.enqueued
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
    let now = reminders_core::clock::Clock::now(&w.clock);
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
        reminders_core::ports::SeriesStore::series_due(&*w.store, far, u32::MAX).await,
        Ok(due) if due.iter().all(|s| s.next_after(s.made_through).is_none())
    )
}

async fn idle(w: &World) -> bool {
    matches!(
        crate::local::nothing_pending(w.consumer.ports()).await,
        Ok(true)
    )
}
