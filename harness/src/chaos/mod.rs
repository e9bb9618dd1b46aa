//! The system checker: seeded worlds in which the real scheduler, consumer and redrive run on
//! the in-memory ports, in virtual time, while faults strike at every port call — latency,
//! failures before the effect, throttles, lost responses after it, crashes of the invocation
//! before or after a call — and around them: duplicate queue deliveries, concurrent workers on
//! one message (visibility shorter than the work), two schedulers at once, a provider that
//! throttles with Retry-After, fails, rejects, accepts then drops the connection or accepts
//! after the caller's timeout, an outage, redrive runs, cancels and edits at random moments,
//! subscribers who opt out of a channel or set quiet hours (in their IANA zone, across the
//! world's clock) at random moments, series made, edited and cancelled, a subscriber erased while
//! the maker and the consumers run, and ledger writes whose answer was lost sent again by the SDK.
//! Then the faults stop, the world must settle, and every
//! delivery key is judged ([`check`]): never sent twice, none lost, nothing sent when it must
//! not be (stale, early, after a cancel, to an opted-out channel, inside quiet hours).
//!
//! Time is tokio's paused clock: it jumps to the next timer whenever every task waits, so an
//! hour of a world takes milliseconds, and one seed gives one run.

mod acks;
mod adapter;
mod api_edit;
mod books;
mod chains;
mod check;
mod copies;
mod cursors;
mod detached;
mod dice;
mod erasure;
mod events;
mod journal;
mod newer;
mod observed;
mod occurrences;
mod operator;
mod plant;
mod prompt;
mod provider;
mod queues;
mod run;
mod seed;
mod series;
mod shape;
mod subscribers;
mod surface;
mod tally;
mod verdicts;
mod world;

use std::time::Duration;

pub use plant::Plant;
pub use tally::Tally;

use reminders_core::clock::{Clock, Timestamp};

/// What every world of a run shares: the fault planted in each, if any, and up to how far
/// (milliseconds, either way) each consumer worker's clock is off the world's: by default the
/// margin the consumer allows ([`reminders_core::domain::reminder::CLOCK_MARGIN`]), so every
/// world checks the promises at its edge; 0 gives every worker the world's clock. Beyond the
/// margin, a worker whose clock runs ahead may expire a reminder before the `fresh_until` the API
/// acknowledged (`expired_while_fresh`; docs/testing.md, "Proving it").
#[derive(Debug, Clone, Copy)]
pub struct Worlds {
    pub plant: Option<Plant>,
    pub worker_skew_ms: u32,
}

impl Default for Worlds {
    fn default() -> Self {
        Self {
            plant: None,
            worker_skew_ms: reminders_core::domain::reminder::CLOCK_MARGIN.as_millis() as u32,
        }
    }
}

impl Worlds {
    /// Worlds with `plant` planted, their workers' clocks off by the default skew.
    pub fn planted(plant: Option<Plant>) -> Self {
        Self {
            plant,
            ..Self::default()
        }
    }
}

/// One world's result, with a line per broken promise (key and what happened).
#[derive(Debug, Clone, Default)]
pub struct SeedReport {
    pub seed: u64,
    pub tally: Tally,
    pub findings: Vec<String>,
}

/// Run one seeded world to the end.
pub fn run_seed(seed: u64, worlds: Worlds) -> SeedReport {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build();
    match rt {
        Ok(rt) => {
            let local = tokio::task::LocalSet::new();
            rt.block_on(local.run_until(run::run(seed::Seed(seed), worlds)))
        }
        Err(e) => SeedReport {
            seed,
            findings: vec![format!("cannot start a runtime: {e}")],
            tally: Tally {
                lost: 1,
                ..Tally::default()
            },
        },
    }
}

/// The virtual clock of a world: tokio's paused time, from a fixed epoch.
#[derive(Debug, Clone, Copy)]
pub struct VirtualClock {
    epoch: Timestamp,
    start: tokio::time::Instant,
}

impl VirtualClock {
    /// Must be made inside the world's runtime.
    pub fn start(epoch: Timestamp) -> Self {
        Self {
            epoch,
            start: tokio::time::Instant::now(),
        }
    }
}

impl VirtualClock {
    /// The same clock, `by_ms` ahead (behind, when negative): a worker whose clock is skewed.
    pub fn skewed(self, by_ms: i64) -> Self {
        Self {
            epoch: Timestamp::from_millis(self.epoch.as_millis().saturating_add(by_ms)),
            start: self.start,
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Timestamp {
        dice::frozen().unwrap_or_else(|| self.epoch.plus(self.start.elapsed()))
    }
    fn sleep(&self, d: Duration) -> impl std::future::Future<Output = ()> + Send {
        tokio::time::sleep(d)
    }
}

/// Seeds `from .. from + seeds`, on every core: the sum, and the worlds that broke a promise
/// (by seed). `on_seed` hears of each world as it ends.
pub fn run(
    from: u64,
    seeds: u64,
    worlds: Worlds,
    on_seed: &(dyn Fn(&SeedReport) + Sync),
) -> (Tally, Vec<SeedReport>) {
    let next = std::sync::atomic::AtomicU64::new(from);
    let end = from.saturating_add(seeds);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let seed = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if seed >= end {
                    break;
                }
                let report = run_seed(seed, worlds);
                on_seed(&report);
                reminders_core::sync::lock(&results).push(report);
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|r| r.seed);
    let mut total = Tally::default();
    for r in &results {
        total.add(&r.tally);
    }
    results.retain(|r| r.tally.broken() > 0);
    (total, results)
}
