//! The embedded pipeline: the real scheduler and consumer on in-memory ports, a virtual clock
//! and a simulated provider ([`provider`]), advanced one virtual second at a time. The same
//! seed gives the same run, byte for byte: time and randomness come only from the ports, and
//! it runs on one thread.
//!
//! Each virtual second: the scheduler runs on its period, then each channel's event source
//! mapping takes up to `batches_per_second` batches of ten through the consumer. At the end,
//! the redrive library's read-only DLQ look accounts for messages the queues' redrive policy
//! moved (crash loops).

pub mod chart;
mod config;
pub mod latency;
pub mod plan;
pub mod provider;
pub mod recipients;
pub mod report;

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

pub use config::{deployed, SeriesLoad, SimConfig, DEFAULT_DENSITY_PER_SEC, EPOCH};
use latency::{RunClock, Timed};
pub use provider::{Profile, SimProvider};
use reminders::clock::ManualClock;
use reminders::consumer::{Consumer, ConsumerConfig, Metrics};
use reminders::domain::{
    Channel, Content, DeadReason, NewReminder, PerChannel, Recipient, Reminder, ReminderId,
    ReminderStatus, SubscriberId,
};
use reminders::ledger::Status;
use reminders::ports::{
    MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore, PortSet, ReminderStore,
};
use reminders::scheduler::{Scheduler, SchedulerConfig, Share};
pub use report::{Sample, SimReport};

/// The scheduler's ports: its own run clock, the store and queues timed by the model.
type SchedulerPorts = PortSet<
    RunClock,
    Arc<Timed<Arc<MemoryReminderStore>>>,
    Arc<MemoryLedger>,
    Arc<MemoryGate>,
    Arc<Timed<Arc<MemoryQueue<ManualClock>>>>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<SimProvider<ManualClock>>,
>;

type SimPorts = PortSet<
    ManualClock,
    Arc<MemoryReminderStore>,
    Arc<MemoryLedger>,
    Arc<MemoryGate>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<SimProvider<ManualClock>>,
>;

struct World {
    clock: ManualClock,
    store: Arc<MemoryReminderStore>,
    ledger: Arc<MemoryLedger>,
    queue: Arc<MemoryQueue<ManualClock>>,
    dlq: Arc<MemoryQueue<ManualClock>>,
    provider: Arc<SimProvider<ManualClock>>,
    scheduler: Scheduler<SchedulerPorts>,
    run_clock: RunClock,
    parallelism: u32,
    consumer: Consumer<SimPorts>,
    urls: PerChannel<String>,
}

fn world(cfg: &SimConfig) -> World {
    let clock = ManualClock::at(EPOCH);
    let store = Arc::new(MemoryReminderStore::new(8));
    let ledger = Arc::new(MemoryLedger::default());
    let dlq = Arc::new(MemoryQueue::new(clock.clone()));
    let queue = Arc::new(MemoryQueue::new(clock.clone()).with_redrive(100, dlq.clone()));
    let provider = Arc::new(SimProvider::new(
        clock.clone(),
        cfg.profile.clone(),
        cfg.seed,
    ));
    let gate = Arc::new(MemoryGate::default());
    let ports = PortSet {
        clock: clock.clone(),
        reminders: store.clone(),
        ledger: ledger.clone(),
        gate: gate.clone(),
        queue: queue.clone(),
        dead_letters: dlq.clone(),
        providers: PerChannel::from_fn(|_| provider.clone()),
    };
    let urls = PerChannel::from_fn(|c| format!("http://sim/000000000000/reminders-{c}"));
    let (deployed_scheduler, deployed_consumer, _) = deployed();
    let scheduler_cfg = SchedulerConfig {
        max_per_run: cfg.max_per_run,
        ..deployed_scheduler
    };
    let run_clock = RunClock::new(clock.clone(), cfg.latency, cfg.seed ^ 0x1a7e);
    let groups = scheduler_cfg.send_concurrency as f64;
    let scheduler_ports = PortSet {
        clock: run_clock.clone(),
        reminders: Arc::new(Timed {
            inner: store.clone(),
            clock: run_clock.clone(),
            groups,
        }),
        ledger: ledger.clone(),
        gate,
        queue: Arc::new(Timed {
            inner: queue.clone(),
            clock: run_clock.clone(),
            groups,
        }),
        dead_letters: dlq.clone(),
        providers: PerChannel::from_fn(|_| provider.clone()),
    };
    let consumer_cfg = ConsumerConfig {
        policy: cfg.policy.clone(),
        breaker: cfg.breaker,
        ..deployed_consumer
    };
    World {
        scheduler: Scheduler::new(scheduler_ports, scheduler_cfg),
        run_clock,
        parallelism: cfg
            .scheduler_parallelism
            .clamp(1, reminders::scheduler::config::MAX_PARALLELISM),
        consumer: Consumer::new(ports, consumer_cfg, urls.clone(), cfg.seed),
        clock,
        store,
        ledger,
        queue,
        dlq,
        provider,
        urls,
    }
}

fn recipient(channel: Channel, i: u32) -> Recipient {
    let raw = match channel {
        Channel::Push => format!("device-{i:08}"),
        Channel::Email => format!("person{i}@example.com"),
        Channel::Sms => format!("+1415{:07}", i % 10_000_000),
    };
    // Built from fixed patterns that always validate.
    Recipient::parse(channel, &raw).unwrap_or_else(|_| unreachable!("sim recipient {raw}"))
}

/// The `i`th series of a series load: subscriber `v-{i}`, its channel round robin, from the
/// epoch to the end of the window.
pub fn load_series(
    cfg: &SimConfig,
    load: &SeriesLoad,
    i: u32,
) -> Result<reminders::domain::series::Series, reminders::domain::series::SeriesError> {
    use reminders::domain::series::{NewSeries, Series};
    let channel = cfg.channels[i as usize % cfg.channels.len().max(1)];
    let new = NewSeries {
        series_id: reminders::domain::SeriesId::parse(format!("v-{i:07}"))
            .unwrap_or_else(|_| unreachable!()),
        subscriber_id: SubscriberId::parse(format!("v-{i}")).unwrap_or_else(|_| unreachable!()),
        rule: load.rule.clone(),
        zone: load.zone.clone(),
        starts_at: EPOCH,
        until: Some(EPOCH.plus(cfg.window)),
        fresh_for: Some(cfg.freshness),
        content: Content::Text {
            subject: "Reminder".into(),
            body: "Your daily reminder".into(),
        },
        recipients: vec![recipient(channel, i)],
    };
    Series::new(new, cfg.freshness)
}

/// Deliveries the load asks for: the one-off reminders and every occurrence of the series
/// inside the window.
pub fn planned(cfg: &SimConfig) -> u64 {
    let occurrences = cfg.series.as_ref().map_or(0, |load| {
        load_series(cfg, load, 0).map_or(0, |s| s.instants_after(None).len() as u64)
            * u64::from(load.count)
    });
    u64::from(cfg.reminders) + occurrences
}

async fn seed_reminders(w: &World, cfg: &SimConfig) {
    if cfg.recipient_rules {
        recipients::seed(&w.store, cfg.subscribers).await;
    }
    if let Some(load) = &cfg.series {
        for i in 0..load.count {
            if let Ok(s) = load_series(cfg, load, i) {
                let _ = reminders::ports::SeriesStore::put_series(
                    &*w.store,
                    &s,
                    reminders::ports::ExpectedSeries::Absent,
                )
                .await;
            }
        }
    }
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0x5eed);
    let window_ms = cfg.window.as_millis().max(1) as u64;
    for i in 0..cfg.reminders {
        let channel = cfg.channels[i as usize % cfg.channels.len().max(1)];
        let due = EPOCH.plus(Duration::from_millis(rng.random_range(0..window_ms)));
        let reminder = Reminder::new(
            NewReminder {
                reminder_id: ReminderId::parse(format!("r-{i:07}"))
                    .unwrap_or_else(|_| unreachable!()),
                subscriber_id: SubscriberId::parse(format!("s-{}", i % cfg.subscribers.max(1)))
                    .unwrap_or_else(|_| unreachable!()),
                due_at: due,
                fresh_until: Some(due.plus(cfg.freshness)),
                content: Content::Text {
                    subject: "Reminder".into(),
                    body: "Your appointment is soon".into(),
                },
                recipients: vec![recipient(channel, i)],
            },
            cfg.freshness,
            reminders::domain::Retention::default().0,
        );
        if let Ok(r) = reminder {
            let _ = w.store.insert(&r).await;
        }
    }
}

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

/// Final status of each reminder's delivery: the ledger's, else the reminder's own.
pub(crate) async fn outcomes(
    w_store: &MemoryReminderStore,
    w_ledger: &MemoryLedger,
    dlq: &MemoryQueue<ManualClock>,
    cfg: &SimConfig,
) -> report::Outcomes {
    let mut o = report::Outcomes::default();
    let mut in_dlq = std::collections::BTreeMap::new();
    for channel in Channel::ALL {
        // The redrive library's read-only look: nothing is moved.
        if let Ok(msgs) = reminders::redrive::peek(dlq, channel, u32::MAX, 60).await {
            for m in msgs {
                if let Ok(msg) = reminders::domain::DeliveryMessage::decode(&m.message.body) {
                    in_dlq.insert(msg.delivery_key, m.letter.reason);
                }
            }
        }
    }
    let by_key: std::collections::BTreeMap<_, _> = w_ledger
        .snapshot()
        .into_iter()
        .map(|r| (r.key().clone(), r))
        .collect();
    let mut ids: Vec<ReminderId> = (0..cfg.reminders)
        .filter_map(|i| ReminderId::parse(format!("r-{i:07}")).ok())
        .collect();
    if let Some(load) = &cfg.series {
        for i in 0..load.count {
            let Ok(s) = load_series(cfg, load, i) else {
                continue;
            };
            for at in s.instants_after(None) {
                ids.push(reminders::domain::series::occurrence_id(&s.series_id, at));
            }
        }
    }
    for id in ids {
        let Ok(Some(r)) = w_store.get(&id).await else {
            // Never made (a maker that fell behind the window): not sent, still owed.
            if cfg.series.is_some() && reminders::domain::series::occurrence_of(&id).is_some() {
                o.pending += 1;
            }
            continue;
        };
        let Some(channel) = r.channels().next() else {
            continue;
        };
        let key = reminders::domain::DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
        match by_key
            .get(&key)
            .map(|rec| (rec.status(), rec.dead_reason()))
        {
            Some((Status::Delivered, _)) => o.delivered += 1,
            Some((Status::Expired, _)) => o.expired += 1,
            Some((Status::Cancelled, _)) => o.cancelled += 1,
            Some((Status::Dead, reason)) => {
                *o.dead
                    .entry(reason.unwrap_or(DeadReason::Rejected))
                    .or_default() += 1
            }
            None if r.status == ReminderStatus::Expired => o.expired += 1,
            _ => match in_dlq.get(&key) {
                Some(reason) => *o.dead.entry(*reason).or_default() += 1,
                None => o.pending += 1,
            },
        }
    }
    o
}

impl World {
    pub(crate) fn parts(
        &self,
    ) -> (
        &MemoryReminderStore,
        &MemoryLedger,
        &MemoryQueue<ManualClock>,
        &SimProvider<ManualClock>,
    ) {
        (&self.store, &self.ledger, &self.dlq, &self.provider)
    }
}
