//! The local pipeline runner: plays EventBridge Scheduler (a scheduler run every period) and
//! each channel's event source mapping ([`crate::mapping::Mapping`]: receive up to the batch
//! size, build the same `SqsEvent`, call the same handler, delete what succeeded, leave batch
//! item failures to their visibility) — on an emulator, LocalStack, or in-memory ports.

use std::time::Duration;

use reminders_core::clock::{Clock, Timestamp};
use reminders_core::consumer::{Consumer, Metrics};
use reminders_core::domain::{Channel, PerChannel};
use reminders_core::ports::{
    DeliveryQueue, PortError, Ports, QueueDepth, ReminderStore, SeriesStore,
};
use reminders_core::scheduler::Scheduler;

use crate::mapping::Mapping;

mod idle;
mod shared;

use idle::{in_flight, watch};
pub use idle::{next_due, nothing_pending};
use shared::Shared;

#[derive(Debug, Clone)]
pub struct LocalConfig {
    pub schedule_period: Duration,
    pub batch_size: u32,
    /// The queues' visibility timeout (what the event source mapping receives with).
    pub visibility_secs: u32,
    /// The consumer function's timeout (its invocation deadline).
    pub function_timeout: Duration,
    /// The scheduler function's timeout.
    pub scheduler_timeout: Duration,
    /// Pause between polls when nothing happened.
    pub poll_interval: Duration,
    /// An idle run stops when nothing is due before now + this (and every queue is empty).
    pub idle_horizon: Duration,
    /// The TTL of the series occurrences the schedule makes (`RETENTION_SECS`).
    pub retention: reminders_core::domain::Retention,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            schedule_period: Duration::from_secs(60),
            batch_size: 10,
            visibility_secs: 180,
            function_timeout: Duration::from_secs(30),
            scheduler_timeout: Duration::from_secs(50),
            poll_interval: Duration::from_millis(500),
            idle_horizon: Duration::from_secs(120),
            retention: reminders_core::domain::Retention::default(),
        }
    }
}

/// When to stop.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    /// Once no message is waiting to be worked on within the idle horizon and nothing is due
    /// within it. A message this run held past the horizon (quiet hours, a long backoff) does
    /// not count, nor, after one horizon from the start, one in flight since before the run.
    Idle {
        at_most: Duration,
    },
    For(Duration),
}

#[derive(Debug, Clone, Default)]
pub struct LocalReport {
    pub scheduler_runs: u32,
    pub enqueued: u32,
    pub batches: u32,
    pub metrics: PerChannel<Metrics>,
    /// Stopped because nothing was due within the horizon and no message would come back
    /// within it.
    pub idle: bool,
    /// Transient errors retried (each logged).
    pub retried_errors: u32,
    /// When the next scheduled reminder is due, if one is (after an idle stop).
    pub next_due: Option<Timestamp>,
    /// Items the scheduler quarantined (its runs and its sweeps).
    pub quarantined: u32,
    /// Shards whose due-index query failed on the last run, with runs in a row: their
    /// reminders wait until the shard answers.
    pub failing_shards: Vec<reminders_core::scheduler::FailedShard>,
    /// Occurrences of series the schedule made.
    pub occurrences_made: u32,
    /// After an idle stop: the deliveries still held (quiet hours, a retry's backoff), by
    /// channel: this run's with when the first comes back, and those in flight since before
    /// the run. They are not lost: their messages wait in the queue, and the next run (or the
    /// deployed consumer) takes them.
    pub held: Vec<Held>,
}

/// One channel's deliveries still held when an idle run stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub channel: Channel,
    pub messages: u32,
    /// When the first of them is visible again; `None` for messages already in flight when
    /// the run started (held by an earlier run, or a worker that stopped): SQS does not tell
    /// a client when those come back.
    pub first_back: Option<Timestamp>,
}

/// What a run has done so far, for a live progress line: the report, and each channel's
/// queue depth (`None` when it could not be read this time).
#[derive(Debug, Clone)]
pub struct Progress {
    pub report: LocalReport,
    pub depths: PerChannel<Option<QueueDepth>>,
}

/// Play the deployed wiring until `stop` (or `interrupt` is set): the schedule and each
/// channel's event source mapping run concurrently and independently, as on AWS. A transient
/// error (throttling, an unreachable endpoint) is logged and retried with backoff, as an event
/// source mapping would; any other error stops the run. `on_progress`, if given, is called about every `poll_interval` (it reads the queue depths, so
/// only a caller that shows them asks).
pub async fn run<P: Ports>(
    scheduler: &Scheduler<P>,
    consumer: &Consumer<P>,
    queue_urls: &PerChannel<String>,
    cfg: &LocalConfig,
    stop: Stop,
    interrupt: &std::sync::atomic::AtomicBool,
    on_progress: Option<&(dyn Fn(&Progress) + Sync)>,
) -> Result<LocalReport, PortError>
where
    P::Reminders: SeriesStore,
{
    let clock = consumer.ports().clock();
    let limit = match stop {
        Stop::Idle { at_most } | Stop::For(at_most) => clock.now().plus(at_most),
    };
    let shared = Shared {
        report: std::sync::Mutex::new(LocalReport::default()),
        stop: std::sync::atomic::AtomicBool::new(false),
        holds: std::sync::Mutex::default(),
        others_waited_until: clock.now().plus(cfg.idle_horizon),
        at_work: PerChannel::default(),
    };
    let channels = Channel::ALL.map(|c| channel_loop(consumer, queue_urls, cfg, c, &shared));
    let (scheduled, polled, watched) = futures::join!(
        schedule_loop(scheduler, cfg, &shared),
        futures::future::join_all(channels),
        watch(consumer, cfg, stop, limit, interrupt, &shared, on_progress),
    );
    let mut report = shared.report().clone();
    if report.idle {
        report.held = shared.held(clock.now(), &in_flight(consumer.ports()).await);
    }
    scheduled?;
    polled.into_iter().collect::<Result<Vec<()>, _>>()?;
    watched?;
    Ok(report)
}

/// Sleep `d`, in steps, returning early once the run stops.
async fn pause<C: Clock>(clock: &C, d: Duration, shared: &Shared) {
    let step = Duration::from_millis(200);
    let until = clock.now().plus(d);
    while !shared.stopped() && clock.now() < until {
        clock.sleep(step.min(until.since(clock.now()))).await;
    }
}

/// A failed step: transient errors are logged and waited out (doubling, up to 30 s); any
/// other error stops the run.
async fn on_error<C: Clock>(
    clock: &C,
    e: PortError,
    what: &str,
    backoff: &mut Duration,
    shared: &Shared,
) -> Result<(), PortError> {
    if !e.is_retryable() {
        shared.halt();
        return Err(e);
    }
    shared.report().retried_errors += 1;
    tracing::warn!(error = %e, retry_in_secs = backoff.as_secs_f64(), "{what} failed; retrying");
    pause(clock, *backoff, shared).await;
    *backoff = (*backoff * 2).min(Duration::from_secs(30));
    Ok(())
}

/// EventBridge Scheduler: a run every period (the scan, then the first share's maker of
/// series occurrences).
async fn schedule_loop<P: Ports>(
    scheduler: &Scheduler<P>,
    cfg: &LocalConfig,
    shared: &Shared,
) -> Result<(), PortError>
where
    P::Reminders: SeriesStore,
{
    let clock = scheduler.ports().clock();
    let mut backoff = Duration::from_secs(1);
    while !shared.stopped() {
        let now = clock.now();
        match scheduler.run(Some(now.plus(cfg.scheduler_timeout))).await {
            Ok(run) => {
                backoff = Duration::from_secs(1);
                let mut r = shared.report();
                r.scheduler_runs += 1;
                r.enqueued += run.enqueued;
                r.quarantined += run.quarantined;
                r.failing_shards = run.failed_shards;
            }
            Err(e) => on_error(clock, e, "scheduler run", &mut backoff, shared).await?,
        }
        // The first share's maker, after its scan, as deployed.
        let p = scheduler.ports();
        let at = clock.now();
        let made =
            reminders_core::series::make_due(p.reminders(), p.ledger(), at, cfg.retention).await;
        shared.report().occurrences_made += made.made;
        let next = now.plus(cfg.schedule_period);
        pause(clock, next.since(clock.now()), shared).await;
    }
    Ok(())
}

/// One channel's event source mapping: poll, hand the batch to the consumer, delete what
/// succeeded; an empty poll waits `poll_interval`.
async fn channel_loop<P: Ports>(
    consumer: &Consumer<P>,
    queue_urls: &PerChannel<String>,
    cfg: &LocalConfig,
    channel: Channel,
    shared: &Shared,
) -> Result<(), PortError> {
    let clock = consumer.ports().clock();
    let mapping = Mapping::new(queue_urls, channel, cfg.batch_size, cfg.visibility_secs);
    let mut backoff = Duration::from_secs(1);
    while !shared.stopped() {
        let deadline = clock.now().plus(cfg.function_timeout);
        let at_work = shared.at_work.get(channel);
        at_work.store(true, std::sync::atomic::Ordering::SeqCst);
        let polled = mapping.poll(consumer, Some(deadline)).await;
        if let Ok(Some(out)) = &polled {
            shared.note(channel, &out.records, clock.now(), cfg.visibility_secs);
        }
        at_work.store(false, std::sync::atomic::Ordering::SeqCst);
        match polled {
            Ok(Some(out)) => {
                backoff = Duration::from_secs(1);
                let mut r = shared.report();
                r.batches += 1;
                for c in Channel::ALL {
                    r.metrics.get_mut(c).merge(out.metrics.get(c).clone());
                }
            }
            Ok(None) => pause(clock, cfg.poll_interval, shared).await,
            Err(e) => on_error(clock, e, "poll", &mut backoff, shared).await?,
        }
    }
    Ok(())
}
