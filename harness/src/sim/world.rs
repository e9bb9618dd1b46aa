//! The simulated world: the in-memory ports on one virtual clock, the real scheduler (its
//! store and queue timed by the latency model, on a run clock of its own) and the real
//! consumer, wired as deployed ([`super::deployed`]) but for what the config changes.

use std::sync::Arc;

use crate::stack::MemoryStack;
use crate::ManualClock;
use reminders_core::consumer::{Consumer, ConsumerConfig};
use reminders_core::domain::PerChannel;
use reminders_core::ports::{
    MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore, PortSet, ReminderStore,
};
use reminders_core::scheduler::{Scheduler, SchedulerConfig};

use super::capacity::Dynamo;
use super::config::{deployed, SimConfig, EPOCH};
use super::latency::{RunClock, RunTimer, Timed};
use super::metered::{BatchMeter, Metered};
use super::provider::SimProvider;
use super::seed::Stream;

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

/// The consumer's ports: its DynamoDB calls metered (metered.rs).
type SimPorts = PortSet<
    ManualClock,
    Arc<Metered<Arc<MemoryReminderStore>>>,
    Arc<Metered<Arc<MemoryLedger>>>,
    Arc<MemoryGate>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<SimProvider<ManualClock>>,
>;

pub(super) struct World {
    pub(super) clock: ManualClock,
    pub(super) store: Arc<MemoryReminderStore>,
    pub(super) ledger: Arc<MemoryLedger>,
    pub(super) queue: Arc<MemoryQueue<ManualClock>>,
    pub(super) dlq: Arc<MemoryQueue<ManualClock>>,
    pub(super) provider: Arc<SimProvider<ManualClock>>,
    pub(super) scheduler: Scheduler<SchedulerPorts>,
    pub(super) run_clock: RunClock,
    pub(super) parallelism: u32,
    pub(super) max_per_run: u32,
    pub(super) consumer: Consumer<SimPorts>,
    pub(super) urls: PerChannel<String>,
    /// DynamoDB's modelled throughput, and the consumer's batch meter (capacity.rs, metered.rs).
    pub(super) dynamo: Arc<Dynamo>,
    pub(super) meter: Arc<BatchMeter>,
    /// Records the consumer runs at once inside a batch.
    pub(super) consumer_concurrency: usize,
}

pub(super) fn world(cfg: &SimConfig) -> World {
    let stack = MemoryStack::on(ManualClock::at(EPOCH))
        .with_shards(cfg.due_shards)
        .with_redrive(100);
    let clock = stack.clock.clone();
    let dynamo = Arc::new(Dynamo::new(cfg.tables, cfg.seed));
    let meter = Arc::new(BatchMeter::new(
        cfg.latency,
        clock.clone(),
        dynamo.clone(),
        cfg.seed,
    ));
    let provider = Arc::new(SimProvider::new(
        clock.clone(),
        cfg.profile.clone(),
        cfg.seed,
    ));
    let ports = stack
        .ports(provider.clone())
        .map_reminders(|s| Arc::new(Metered::new(s, meter.clone())))
        .map_ledger(|l| Arc::new(Metered::new(l, meter.clone())));
    let urls = PerChannel::from_fn(|c| format!("http://sim/000000000000/reminders-{c}"));
    let (deployed_scheduler, deployed_consumer, _) = deployed();
    let scheduler_cfg = SchedulerConfig {
        max_per_run: cfg.max_per_run,
        ..deployed_scheduler
    };
    let run_clock = RunClock::new(clock.clone(), cfg.latency, cfg.seed);
    let groups = scheduler_cfg.send_concurrency as f64;
    let timer = || RunTimer {
        clock: run_clock.clone(),
        groups,
        dynamo: dynamo.clone(),
        shards: stack.store.shards(),
    };
    // The same handles on the scheduler's own run clock, its table and queues timed by it.
    let scheduler_ports = stack
        .ports(provider.clone())
        .map_clock(|_| run_clock.clone())
        .map_reminders(|s| Arc::new(Timed::new(s, timer())))
        .map_queue(|q| Arc::new(Timed::new(q, timer())));
    let MemoryStack {
        store,
        ledger,
        queue,
        dlq,
        ..
    } = stack;
    let consumer_cfg = ConsumerConfig {
        policy: cfg.policy.clone(),
        breaker: cfg.breaker,
        ..deployed_consumer
    };
    let consumer_concurrency = consumer_cfg.max_concurrency;
    let max_per_run = scheduler_cfg.max_per_run;
    World {
        dynamo,
        meter,
        consumer_concurrency,
        max_per_run,
        scheduler: Scheduler::new(scheduler_ports, scheduler_cfg),
        run_clock,
        parallelism: cfg
            .scheduler_parallelism
            .clamp(1, reminders_core::scheduler::config::MAX_PARALLELISM),
        consumer: Consumer::new(
            ports,
            consumer_cfg,
            urls.clone(),
            Stream::Consumer.of(cfg.seed),
        ),
        clock,
        store,
        ledger,
        queue,
        dlq,
        provider,
        urls,
    }
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
