//! The local pipeline runner: plays EventBridge Scheduler (a scheduler run every period) and
//! each channel's event source mapping (receive up to the batch size, build the same
//! `SqsEvent`, call the same handler, delete what succeeded, leave batch item failures to their
//! visibility) — on an emulator, LocalStack, or in-memory ports.

use std::time::Duration;

use reminders_core::clock::{Clock, Timestamp};
use reminders_core::consumer::event::{arn_for_url, to_sqs_event};
use reminders_core::consumer::{BatchOutcome, Consumer, Metrics};
use reminders_core::domain::{Channel, PerChannel};
use reminders_core::ports::{
    DeliveryQueue, PortError, Ports, QueueDepth, ReminderStore, SeriesStore,
};
use reminders_core::scheduler::Scheduler;

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

/// Shared by the loops of one run: the report, and whether to stop.
struct Shared {
    report: std::sync::Mutex<LocalReport>,
    stop: std::sync::atomic::AtomicBool,
    /// Messages this run's consumer held (their visibility moved out), by message id, with
    /// when they come back: a message held past the idle horizon (quiet hours, a long
    /// backoff) is no work for an idle run to wait for.
    holds: std::sync::Mutex<PerChannel<std::collections::HashMap<String, Timestamp>>>,
    /// Until when messages in flight that this run did not take are waited for: the start
    /// plus the idle horizon. Those are held by an earlier run (quiet hours, a backoff) or a
    /// worker that stopped, and SQS does not tell a client when they come back: a backoff
    /// shorter than the horizon comes back and is taken; waiting longer would wait out quiet
    /// hours. The summary names those still in flight.
    others_waited_until: Timestamp,
    /// Each channel's mapping while it receives and works a batch: busy whatever the queue says.
    at_work: PerChannel<std::sync::atomic::AtomicBool>,
}

impl Shared {
    fn report(&self) -> std::sync::MutexGuard<'_, LocalReport> {
        self.report.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn stopped(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn halt(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    fn holds(
        &self,
    ) -> std::sync::MutexGuard<'_, PerChannel<std::collections::HashMap<String, Timestamp>>> {
        self.holds.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// What a batch did to its messages: held ones come back later, others are gone or back.
    /// `visibility_secs`: what a message left in flight (a failed record, a lease lost) waits
    /// before it is visible again.
    fn note(
        &self,
        channel: Channel,
        records: &[reminders_core::consumer::RecordReport],
        now: Timestamp,
        visibility_secs: u32,
    ) {
        use reminders_core::consumer::Action;
        let mut holds = self.holds();
        let held = holds.get_mut(channel);
        for r in records {
            let secs = match r.action {
                Action::Hold { secs } => secs,
                Action::Retry | Action::Leave => visibility_secs,
                Action::Ack | Action::Reenqueued | Action::Released => {
                    held.remove(&r.message_id);
                    continue;
                }
            };
            let back = now.plus(Duration::from_secs(u64::from(secs)));
            held.insert(r.message_id.clone(), back);
        }
    }
    /// This run's holds on `channel` that come back after `after`.
    fn holds_after(&self, channel: Channel, after: Timestamp) -> Vec<Timestamp> {
        let holds = self.holds();
        holds
            .get(channel)
            .values()
            .copied()
            .filter(|t| *t > after)
            .collect()
    }
    /// Whether `channel` has work for an idle run to wait for at `now`, with `in_flight`
    /// messages in flight.
    fn busy(&self, channel: Channel, in_flight: u64, now: Timestamp, horizon: Timestamp) -> bool {
        if self
            .at_work
            .get(channel)
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return true;
        }
        let ours = self.holds_after(channel, now);
        // One of this run's messages comes back within the horizon.
        if ours.iter().any(|back| *back <= horizon) {
            return true;
        }
        // In flight and not this run's: held before the run started (or by another consumer),
        // waited for one horizon.
        let others = in_flight.saturating_sub(u64::try_from(ours.len()).unwrap_or(u64::MAX));
        others > 0 && now < self.others_waited_until
    }
    /// What an idle stop leaves pending on each channel, once every loop has stopped: this
    /// run's holds still to come back (with the first one's return), and the other messages
    /// in flight (held before the run started, or by another consumer).
    fn held(&self, now: Timestamp, in_flight: &PerChannel<u64>) -> Vec<Held> {
        let mut out = Vec::new();
        for channel in Channel::ALL {
            let ours = self.holds_after(channel, now);
            let n = u64::try_from(ours.len()).unwrap_or(u64::MAX);
            if let Some(first) = ours.into_iter().min() {
                out.push(Held {
                    channel,
                    messages: u32::try_from(n).unwrap_or(u32::MAX),
                    first_back: Some(first),
                });
            }
            let others = in_flight.get(channel).saturating_sub(n);
            if others > 0 {
                out.push(Held {
                    channel,
                    messages: u32::try_from(others).unwrap_or(u32::MAX),
                    first_back: None,
                });
            }
        }
        out
    }
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
/// source mapping would; any other error stops the run.
pub async fn run<P: Ports>(
    scheduler: &Scheduler<P>,
    consumer: &Consumer<P>,
    queue_urls: &PerChannel<String>,
    cfg: &LocalConfig,
    stop: Stop,
    interrupt: &std::sync::atomic::AtomicBool,
) -> Result<LocalReport, PortError>
where
    P::Reminders: SeriesStore,
{
    run_with_progress(scheduler, consumer, queue_urls, cfg, stop, interrupt, None).await
}

/// [`run`], calling `on_progress` about every `poll_interval` (it reads the queue depths, so
/// only a caller that shows them asks).
pub async fn run_with_progress<P: Ports>(
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
    let mut backoff = Duration::from_secs(1);
    while !shared.stopped() {
        let deadline = clock.now().plus(cfg.function_timeout);
        let at_work = shared.at_work.get(channel);
        at_work.store(true, std::sync::atomic::Ordering::SeqCst);
        let polled = poll_once(
            consumer,
            queue_urls,
            channel,
            cfg.batch_size,
            cfg.visibility_secs,
            Some(deadline),
        )
        .await;
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

/// Decides when the run ends: the time limit, an interrupt, or (for [`Stop::Idle`]) nothing
/// due within the horizon and every queue empty, twice in a row.
async fn watch<P: Ports>(
    consumer: &Consumer<P>,
    cfg: &LocalConfig,
    stop: Stop,
    limit: Timestamp,
    interrupt: &std::sync::atomic::AtomicBool,
    shared: &Shared,
    on_progress: Option<&(dyn Fn(&Progress) + Sync)>,
) -> Result<(), PortError> {
    let clock = consumer.ports().clock();
    let mut quiet = 0;
    while !shared.stopped() {
        if let Some(show) = on_progress {
            let mut depths = PerChannel::<Option<QueueDepth>>::default();
            for c in Channel::ALL {
                *depths.get_mut(c) = consumer.ports().queue().depth(c).await.ok();
            }
            let report = shared.report().clone();
            show(&Progress { report, depths });
        }
        let now = clock.now();
        if now >= limit || interrupt.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        if let Stop::Idle { .. } = stop {
            let horizon = now.plus(cfg.idle_horizon);
            match idle_until(consumer.ports(), now, horizon, shared).await {
                Ok(Some(next_due)) => {
                    quiet += 1;
                    if quiet >= 2 {
                        let mut r = shared.report();
                        r.idle = true;
                        r.next_due = next_due;
                        break;
                    }
                }
                Ok(None) => quiet = 0,
                Err(e) => tracing::warn!(error = %e, "idle check failed; retrying"),
            }
        }
        clock
            .sleep(cfg.poll_interval.max(Duration::from_millis(200)))
            .await;
    }
    shared.halt();
    Ok(())
}

/// `Some(next due)` when every queue is empty and nothing is due before `horizon` (the next
/// due time after it, if any); `None` while there is work.
async fn idle_until<P: Ports>(
    ports: &P,
    now: Timestamp,
    horizon: Timestamp,
    shared: &Shared,
) -> Result<Option<Option<Timestamp>>, PortError> {
    for channel in Channel::ALL {
        let depth = ports.queue().depth(channel).await?;
        // A batch at work, a message of this run's back within the horizon, or (in the first
        // horizon of the run) one in flight since before it.
        let busy = shared.busy(channel, depth.in_flight, now, horizon);
        if depth.visible > 0 || depth.delayed > 0 || busy {
            return Ok(None);
        }
    }
    let next = next_due(ports).await?;
    Ok(match next {
        Some(at) if at <= horizon => None,
        next => Some(next),
    })
}

/// Each channel's messages in flight (0 where the depth cannot be read).
async fn in_flight<P: Ports>(ports: &P) -> PerChannel<u64> {
    let mut out = PerChannel::<u64>::default();
    for c in Channel::ALL {
        *out.get_mut(c) = ports.queue().depth(c).await.map_or(0, |d| d.in_flight);
    }
    out
}

/// The earliest due time in the due index, if any reminder is scheduled.
pub async fn next_due<P: Ports>(ports: &P) -> Result<Option<Timestamp>, PortError> {
    let far = Timestamp::from_millis(i64::MAX / 2);
    let store = ports.reminders();
    let skip = std::collections::BTreeSet::new();
    let mut next: Option<Timestamp> = None;
    for shard in 0..store.shards() {
        let q = reminders_core::ports::DueQuery {
            shard,
            until: far,
            limit: 1,
            after: None,
            skip: &skip,
        };
        for entry in store.query_due(&q).await?.items {
            let at = entry.order().0;
            next = Some(next.map_or(at, |n: Timestamp| n.min(at)));
        }
    }
    Ok(next)
}

/// What an event source mapping does once: receive up to `batch_size` messages, build the
/// same `SqsEvent`, call the handler, delete what succeeded (failures keep their visibility).
/// `None` when nothing was visible.
pub async fn poll_once<P: Ports>(
    consumer: &Consumer<P>,
    queue_urls: &PerChannel<String>,
    channel: Channel,
    batch_size: u32,
    visibility_secs: u32,
    deadline: Option<Timestamp>,
) -> Result<Option<BatchOutcome>, PortError> {
    let queue = consumer.ports().queue();
    let got = queue.receive(channel, batch_size, visibility_secs).await?;
    if got.is_empty() {
        return Ok(None);
    }
    let arn = arn_for_url(queue_urls.get(channel), "local");
    let out = consumer.handle(to_sqs_event(&arn, &got), deadline).await;
    for m in &got {
        let failed = out
            .response
            .batch_item_failures
            .iter()
            .any(|f| f.item_identifier == m.message_id);
        if !failed {
            queue.delete(channel, &m.receipt_handle).await?;
        }
    }
    Ok(Some(out))
}

/// Nothing left anywhere: no scheduled reminder in any shard, no message in any queue.
pub async fn nothing_pending<P: Ports>(ports: &P) -> Result<bool, PortError> {
    Ok(queues_empty(ports).await? && next_due(ports).await?.is_none())
}

/// No message in any channel's queue (visible, in flight or delayed).
async fn queues_empty<P: Ports>(ports: &P) -> Result<bool, PortError> {
    for channel in Channel::ALL {
        if ports.queue().depth(channel).await?.total() > 0 {
            return Ok(false);
        }
    }
    Ok(true)
}
