//! A world's life: drawn from its seed, built, its reminders seeded, the deployed wiring
//! started as tasks on virtual time (schedules, each channel's event source mapping with one
//! to three workers, redrive runs, the operator, the application, subscribers changing their
//! preferences), faults for forty minutes, then calm until everything settles, and judged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinSet;

use super::adapter::Adapter;
use super::dice::invoke;
use super::seed::{Seed, Stream};
use super::world::{
    build, recipient, ChaosPorts, Shape, Windows, World, CHAOS, EPOCH, FUNCTION_TIMEOUT, SETTLE_BY,
};
use super::{check, Plant, SeedReport, Worlds};
use crate::mapping::{Batch, BatchObserver, Mapping};
use reminders_core::clock::{Clock, Timestamp};
use reminders_core::consumer::{BatchOutcome, Consumer};
use reminders_core::domain::{
    Channel, Content, DeliveryKey, NewReminder, Reminder, ReminderId, SubscriberId,
};
use reminders_core::ports::DeliveryQueue;
use reminders_core::scheduler::{Scheduler, SchedulerConfig};

pub(super) async fn run(seed: Seed, worlds: Worlds) -> SeedReport {
    let mut rng = seed.rng(Stream::Shape);
    let mut shape = Shape::draw(&mut rng);
    shape.windows = Windows::draw(seed);
    shape.scheduler_keys = super::world::SchedulerKey::draw(seed);
    if shape.windows.gone_after_ambiguous {
        let m = &mut shape.misbehaviour;
        m.accept_then_drop = m.accept_then_drop.max(0.25);
    }
    if shape.windows.add_after_death {
        // A sender the provider refuses until the operator fixes it (and redrives): the
        // deaths these worlds redrive are `rejected`, the ones with a DLQ copy. 30% of calls,
        // but 15% in the almost-stale probes' worlds, whose reminders must live to see their
        // probes.
        let m = &mut shape.misbehaviour;
        let refused = if shape.windows.probe_near_end {
            0.15
        } else {
            0.3
        };
        m.permanent = m.permanent.max(refused);
    }
    let mut world = build(shape, seed, worlds);
    seed_reminders(&mut world, &mut rng).await;
    let w = world.shape.windows;
    if w.gone_after_ambiguous || w.reorder_after_claim || w.spent_then_fallback {
        super::subscribers::ordered_from_start(&world).await;
    }
    if w.spent_then_fallback {
        fail_the_heads(&mut world).await;
    }
    if world.shape.windows.series {
        super::series::create(&world).await;
    }
    let world = Arc::new(world);
    let mut tasks = JoinSet::new();
    start(&world, &mut tasks);
    tokio::time::sleep(CHAOS).await;
    world.dice.calm();
    settle(&world).await;
    tasks.abort_all();
    check::judge(&world).await
}

async fn seed_reminders(world: &mut World, rng: &mut StdRng) {
    use reminders_core::ports::ReminderStore;
    let mut ids = Vec::new();
    // Where heads die out of budget: fresh for half an hour at least, so that a head's budget, its
    // standby's look and the redrive all come before the end.
    let fresh = if world.shape.windows.spent_then_fallback {
        1_800..3_600
    } else {
        300..3_600
    };
    for i in 0..world.shape.reminders {
        let due = EPOCH.plus(Duration::from_secs(rng.random_range(0..1_200)));
        let channels: Vec<Channel> = Channel::ALL
            .into_iter()
            .filter(|_| rng.random_bool(0.6))
            .collect();
        let channels = if channels.is_empty() {
            vec![Channel::ALL[i as usize % 3]]
        } else {
            channels
        };
        let new = NewReminder {
            reminder_id: ReminderId::parse(format!("r-{i:03}")).unwrap_or_else(|_| unreachable!()),
            subscriber_id: SubscriberId::parse(format!("s-{}", i % 3))
                .unwrap_or_else(|_| unreachable!()),
            due_at: due,
            fresh_until: Some(due.plus(Duration::from_secs(rng.random_range(fresh.clone())))),
            content: Content::Text {
                subject: "Reminder".into(),
                body: "v1".into(),
            },
            recipients: channels.iter().map(|c| recipient(*c, i % 3)).collect(),
        };
        let Ok(r) = Reminder::new(new, Duration::from_secs(3600), world.retention.0) else {
            continue;
        };
        own(world, &r);
        if world.store.insert(&r).await.is_ok() {
            super::surface::created(world, &r);
            world.fresh_at_start.push(r.fresh_until);
            ids.push(r.reminder_id.clone());
        }
    }
    world.ids = ids;
}

/// Heads that die out of budget: the provider fails each subscriber's head address until the
/// operator fixes it.
async fn fail_the_heads(world: &mut World) {
    use reminders_core::ports::ReminderStore;
    for n in 0..3 {
        let Ok(subscriber) = SubscriberId::parse(format!("s-{n}")) else {
            continue;
        };
        if let Ok(Some(prefs)) = world.store.preferences(&subscriber).await {
            if let Some(head) = prefs.fallback.first() {
                reminders_core::sync::lock(&world.failing).insert((subscriber, *head));
            }
        }
    }
}

/// Remember which reminder each of its possible delivery keys belongs to.
fn own(world: &World, r: &Reminder) {
    let mut owners = reminders_core::sync::lock(&world.owners);
    for channel in Channel::ALL {
        let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
        owners.insert(key, r.reminder_id.clone());
    }
}

fn start(world: &Arc<World>, tasks: &mut JoinSet<()>) {
    let schedulers = if world.shape.twin_scheduler { 2 } else { 1 };
    for n in 0..schedulers {
        tasks.spawn_local(schedule(world.clone(), n));
    }
    for channel in Channel::ALL {
        for n in 0..world.shape.workers {
            let mut ports = world.ports.clone();
            ports.clock = world.clock.skewed(skew(world, channel, n));
            let consumer = Consumer::new(
                ports,
                world.consumer_cfg.clone(),
                world.urls.clone(),
                world.seed.worker(Stream::Workers, channel, n),
            )
            .with_suppression_key(Some(suppression_key()));
            tasks.spawn_local(event_source(world.clone(), consumer, channel));
        }
    }
    tasks.spawn_local(super::operator::redrives(world.clone(), world.seed));
    if world.shape.twin_redrive {
        let twin = world.seed.derived(Stream::TwinRedriver);
        tasks.spawn_local(super::operator::redrives(world.clone(), twin));
    }
    tasks.spawn_local(super::operator::operator(world.clone()));
    tasks.spawn_local(super::surface::application(world.clone()));
    if let Some(prompts) = reminders_core::sync::lock(&world.prompts).take() {
        tasks.spawn_local(super::surface::prompted(world.clone(), prompts));
    }
    let bus = Adapter::new(world.bus.clone(), world.dice.clone()).planted(world.plant);
    let bus = Arc::new(bus.port());
    tasks.spawn_local(super::events::stream_to_bus(world.tap.clone(), bus));
    tasks.spawn_local(super::subscribers::change_their_minds(world.clone()));
    if world.shape.windows.series {
        tasks.spawn_local(super::series::surface(world.clone()));
        tasks.spawn_local(super::series::create_past(world.clone()));
        tasks.spawn_local(super::detached::story(world.clone()));
    }
}

/// How far worker `n` of `channel`'s clock is off the world's (milliseconds, from the seed),
/// up to the run's skew ([`super::Worlds::worker_skew_ms`]) either way.
fn skew(world: &World, channel: Channel, n: u32) -> i64 {
    let most = i64::from(world.worker_skew_ms);
    if most == 0 {
        0
    } else {
        let mut rng = StdRng::seed_from_u64(world.seed.worker(Stream::WorkerSkew, channel, n));
        rng.random_range(-most..=most)
    }
}

/// EventBridge Scheduler: a run every minute (a twin runs off-beat, as a double schedule).
async fn schedule(world: Arc<World>, n: u64) {
    let cfg = SchedulerConfig {
        retention: world.retention,
        ..SchedulerConfig::default()
    };
    // A deploy in progress: each schedule hashes sole channels' addresses with the consumers'
    // key, with another key (one rotated under it), or not at all (the previous release, the
    // first index, a key it could not read): the consumers take the one-read path, give its claim
    // back, or read twice, in one world.
    let key = match world.shape.scheduler_keys[usize::try_from(n).unwrap_or(0) % 2] {
        super::world::SchedulerKey::Same => Some(suppression_key()),
        super::world::SchedulerKey::Other => Some(other_key()),
        super::world::SchedulerKey::None => None,
    };
    let scheduler = Scheduler::new(world.ports.clone(), cfg).with_suppression_key(key);
    tokio::time::sleep(Duration::from_secs(n * 29)).await;
    let w = world.shape.windows;
    loop {
        let t = world.clock.now().since(EPOCH).as_secs();
        if w.edit_in_scan && t >= w.paused.0 && t < w.paused.0 + w.paused.1 {
            tokio::time::sleep(Duration::from_secs(60)).await;
            continue;
        }
        let deadline = world.clock.now().plus(Duration::from_secs(50));
        let _ = invoke(scheduler.run(Some(deadline)), Duration::from_secs(60)).await;
        if w.series {
            super::series::make(&world).await;
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
}

/// One worker of a channel's event source mapping: receive, invoke the consumer, delete what
/// succeeded; an empty receive waits (long polling).
async fn event_source(world: Arc<World>, consumer: Consumer<ChaosPorts>, channel: Channel) {
    let mapping = Mapping::new(&world.urls, channel, 10, world.shape.visibility_secs);
    loop {
        let watch = Watch {
            world: &world,
            channel,
            got: AtomicBool::new(false),
        };
        let polled = invoke(mapping.poll_observed(&consumer, &watch), FUNCTION_TIMEOUT).await;
        if polled.is_none() || !watch.got.load(Ordering::Relaxed) {
            let idle = world.dice.range(1, 20);
            tokio::time::sleep(Duration::from_secs(idle)).await;
        }
    }
}

/// What the world sees of one batch: the consumer reads as its channel's, its alarms and
/// one-read counts are tallied; the planted early acknowledgement deletes the batch before
/// the answer. A batch received counts as work even when a delete after it failed.
struct Watch<'a> {
    world: &'a World,
    channel: Channel,
    got: AtomicBool,
}

impl BatchObserver for Watch<'_> {
    async fn received(&self, batch: &Batch) {
        self.got.store(true, Ordering::Relaxed);
        if self.world.plant == Some(Plant::AckBeforeOutcome) {
            for m in &batch.messages {
                let _ = self
                    .world
                    .ports
                    .queue
                    .delete(self.channel, &m.receipt_handle)
                    .await;
            }
        }
    }

    fn deadline(&self) -> Option<Timestamp> {
        Some(self.world.clock.now().plus(FUNCTION_TIMEOUT))
    }

    fn invoke<F>(&self, invocation: F) -> impl std::future::Future<Output = BatchOutcome>
    where
        F: std::future::Future<Output = BatchOutcome>,
    {
        super::observed::reading_as(self.channel, invocation)
    }

    fn handled(&self, out: &BatchOutcome) {
        let m = out.metrics.get(self.channel);
        let alarmed = u64::from(m.invariant_errors + m.panics);
        *reminders_core::sync::lock(&self.world.alarms)
            .entry(self.channel)
            .or_default() += alarmed;
        let mut one_reads = reminders_core::sync::lock(&self.world.one_reads);
        one_reads.0 += u64::from(m.one_read);
        one_reads.1 += u64::from(m.one_read_released);
    }
}

/// Wait, once the faults stop, until nothing is pending anywhere and every write has had its
/// event (and a late acceptance has had its time) and every reminder's `fresh_until` has
/// passed, or the settling time runs out.
async fn settle(world: &World) {
    let give_up = world.clock.now().plus(SETTLE_BY);
    while world.clock.now() < give_up {
        tokio::time::sleep(Duration::from_secs(60)).await;
        if last_deadline(world).await > world.clock.now() {
            continue;
        }
        // Quiet: nothing pending, and the events function's mapping has handled every write
        // that landed (one landing late in the settling, a cancel say, has its event too).
        let quiet = || async {
            matches!(crate::local::nothing_pending(&world.ports).await, Ok(true))
                && world.tap.caught_up()
        };
        if quiet().await {
            tokio::time::sleep(Duration::from_secs(300)).await;
            if quiet().await {
                return;
            }
        }
    }
}

/// The latest `fresh_until` of the world's reminders as stored, and of the last occurrence of
/// every series still active as the application last heard of it (the maker must reach it).
async fn last_deadline(world: &World) -> Timestamp {
    use reminders_core::ports::ReminderStore;
    let mut last = EPOCH;
    for id in &world.ids {
        if let Ok(Some(r)) = world.store.get(id).await {
            last = last.max(r.fresh_until);
        }
    }
    let books = reminders_core::sync::lock(&world.series.0).clone();
    for book in books.values().filter(|b| b.cancelled.is_none()) {
        if let Some((_, _, s)) = book.versions.last() {
            if let Some(at) = s.instants_between(None, s.until, 500).last() {
                last = last.max(at.plus(s.fresh_for));
            }
        }
    }
    last
}

/// Suppressions are kept in every world: a 410 suppresses the address.
/// A key the consumers do not hash with: the messages hashed under it name another address.
fn other_key() -> reminders_core::ports::secret::SuppressionKeySource {
    let key =
        reminders_core::domain::SuppressionKey::new(b"chaos-rotated-suppression-key".to_vec())
            .unwrap_or_else(|_| unreachable!("a key of 29 bytes"));
    reminders_core::ports::secret::SuppressionKeySource::Fixed(key)
}

fn suppression_key() -> reminders_core::ports::secret::SuppressionKeySource {
    let key = reminders_core::domain::SuppressionKey::new(b"chaos-suppression-key".to_vec())
        .unwrap_or_else(|_| unreachable!("a key of 21 bytes"));
    reminders_core::ports::secret::SuppressionKeySource::Fixed(key)
}
