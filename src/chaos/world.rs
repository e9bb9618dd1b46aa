//! One seeded world: its shape drawn from the seed, the deployed wiring played as tasks on
//! virtual time (schedules, each channel's event source mapping with one to three workers,
//! redrive runs, an operator's cancels and edits, subscribers changing their preferences),
//! faults for forty minutes, then calm until everything settles.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinSet;

use super::check;
use super::events::Tap;
use super::inject::{invoke, Chaotic, Dice, Rates};
use super::journal::{Journal, Observed};
use super::provider::{ChaosProvider, Misbehaviour};
use super::surface::Acks;
use super::{Plant, SeedReport, VirtualClock};
use crate::clock::{Clock, Timestamp};
use crate::consumer::event::{arn_for_url, to_sqs_event};
use crate::consumer::{Consumer, ConsumerConfig};
use crate::domain::{
    Channel, Content, DeliveryKey, NewReminder, PerChannel, Recipient, Reminder, ReminderId,
    Retention, SubscriberId,
};
use crate::outbox;
use crate::ports::{
    DeliveryQueue, MemoryBus, MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore, PortSet,
    StaleHandles,
};
use crate::scheduler::{Scheduler, SchedulerConfig};

/// The world's retention: past `fresh_until`, a ledger item lives this long.
const RETENTION: Duration = Duration::from_secs(2 * 3600);

pub(super) const EPOCH: Timestamp = Timestamp::from_millis(1_700_000_000_000);
/// How long faults strike; then the world must settle.
pub(super) const CHAOS: Duration = Duration::from_secs(40 * 60);
/// Settled by then, or what is left is lost.
const SETTLE_BY: Duration = Duration::from_secs(12 * 3600);
const FUNCTION_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) type ChaosPorts = PortSet<
    VirtualClock,
    Arc<Chaotic<Arc<MemoryReminderStore>>>,
    Arc<Chaotic<Observed<VirtualClock>>>,
    Arc<Chaotic<Arc<MemoryGate>>>,
    Arc<Chaotic<Arc<MemoryQueue<VirtualClock>>>>,
    Arc<Chaotic<Arc<MemoryQueue<VirtualClock>>>>,
    Arc<ChaosProvider>,
>;

/// The world's shape, drawn from its seed.
pub(super) struct Shape {
    pub reminders: u32,
    pub idempotent: PerChannel<bool>,
    pub workers: u32,
    pub twin_scheduler: bool,
    pub visibility_secs: u32,
    pub max_receive_count: u32,
    pub rates: Rates,
    pub misbehaviour: Misbehaviour,
    pub ops: u32,
    /// What an older receipt handle does (SQS promises neither): half the worlds each.
    pub stale_handles: StaleHandles,
    /// Two operators redrive at once.
    pub twin_redrive: bool,
    /// How long after its TTL the ledger's items go (DynamoDB deletes them some time after).
    pub ttl_lag_secs: i64,
    /// The interleavings of issue 32's windows, drawn apart so that the rest of a seed's
    /// shape stays what it was.
    pub windows: Windows,
}

/// Moments where two features meet, which random timing alone rarely lines up.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Windows {
    /// An address whose attempt was ambiguous answers `410` at its next, and every
    /// subscriber starts with a fallback order of the three channels (window 3).
    pub gone_after_ambiguous: bool,
    /// The application edits a stale reminder fresh again while the scheduler holds the
    /// page it read it in (window 1); and the schedule stops for a while (a deploy, a
    /// disabled rule), so that the scheduler comes back to a backlog gone stale.
    pub edit_in_scan: bool,
    /// When the schedule stops and for how long (seconds from the start).
    pub paused: (u64, u64),
    /// After a death that falls back but names no channel, the application adds the
    /// order's missing channels and the operator redrives that DLQ soon after (window 6).
    pub add_after_death: bool,
    /// A worker stops right after a provider accepted its send, and the application moves
    /// the reminder past the ledger's horizon meanwhile (window 2).
    pub edit_after_accept: bool,
    /// The gate's probe writes are slow, and when a breaker opens the application shortens
    /// a waiting reminder's freshness to end just after the cool-down (window 5).
    pub probe_near_end: bool,
}

impl Windows {
    fn draw(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x3_21d0);
        Self {
            gone_after_ambiguous: rng.random_bool(0.5),
            edit_in_scan: rng.random_bool(0.5),
            edit_after_accept: rng.random_bool(0.5),
            paused: (rng.random_range(300..900), rng.random_range(480..1_200)),
            add_after_death: rng.random_bool(0.5),
            probe_near_end: rng.random_bool(0.5),
        }
    }
}

impl Shape {
    fn draw(rng: &mut StdRng) -> Self {
        let mut rate = |max: f64| rng.random_range(0.0..max);
        let rates = Rates {
            latency: rate(0.1),
            fail_before: rate(0.05),
            throttle: rate(0.03),
            crash: rate(0.02),
            lost_response: rate(0.05),
            duplicate: rate(0.1),
        };
        let misbehaviour = Misbehaviour {
            throttle: rate(0.15),
            transient: rate(0.15),
            permanent: rate(0.03),
            accept_then_drop: rate(0.08),
            slow: rate(0.05),
            gone: rate(0.04),
        };
        Self {
            reminders: rng.random_range(4..16),
            idempotent: PerChannel::from_fn(|_| rng.random_bool(0.5)),
            workers: rng.random_range(1..4),
            twin_scheduler: rng.random_bool(0.5),
            // Sometimes shorter than the work: a second worker gets the same message.
            visibility_secs: if rng.random_bool(0.3) { 20 } else { 180 },
            // The template's lowest maxReceiveCount (20), or its default.
            max_receive_count: if rng.random_bool(0.3) { 20 } else { 100 },
            rates,
            misbehaviour,
            ops: rng.random_range(0..6),
            stale_handles: if rng.random_bool(0.5) {
                StaleHandles::Act
            } else {
                StaleHandles::Ignored
            },
            twin_redrive: rng.random_bool(0.3),
            ttl_lag_secs: rng.random_range(0..600),
            windows: Windows::default(),
        }
    }
}

pub(super) struct World {
    pub shape: Shape,
    pub clock: VirtualClock,
    pub dice: Arc<Dice>,
    pub journal: Arc<Journal>,
    pub store: Arc<MemoryReminderStore>,
    pub ledger: Arc<MemoryLedger>,
    pub dlq: Arc<MemoryQueue<VirtualClock>>,
    pub ports: ChaosPorts,
    pub urls: PerChannel<String>,
    pub ids: Vec<ReminderId>,
    pub owners: Arc<Mutex<BTreeMap<DeliveryKey, ReminderId>>>,
    /// Invalid items written mid-run: each must end quarantined.
    pub invalid_ids: Mutex<BTreeSet<ReminderId>>,
    /// Reminders the operator asked to cancel (whether or not the cancel went through).
    pub cancel_requests: Mutex<BTreeSet<ReminderId>>,
    pub consumer_cfg: ConsumerConfig,
    pub plant: Option<Plant>,
    /// Short, so that edits of hours outrun a delivery's proof on the ledger (whose TTL the
    /// ledger adapter plays).
    pub retention: Retention,
    pub acks: Arc<Acks>,
    /// Each reminder's `fresh_until` as created (by index of `ids`).
    pub fresh_at_start: Vec<Timestamp>,
    pub counts: super::surface::Counts,
    pub tap: Arc<Tap>,
    pub bus: Arc<MemoryBus>,
    /// Per channel: what the consumer's alarmed metrics counted (invariant errors, panics).
    pub alarms: Mutex<BTreeMap<Channel, u64>>,
    /// What the application answers at the windows' moments (taken when the world starts).
    pub prompts: Mutex<Option<super::surface::Prompts>>,
}

pub(super) async fn run(seed: u64, plant: Option<Plant>) -> SeedReport {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut shape = Shape::draw(&mut rng);
    shape.windows = Windows::draw(seed);
    if shape.windows.gone_after_ambiguous {
        let m = &mut shape.misbehaviour;
        m.accept_then_drop = m.accept_then_drop.max(0.25);
    }
    let mut world = build(shape, seed, plant);
    seed_reminders(&mut world, &mut rng).await;
    if world.shape.windows.gone_after_ambiguous {
        super::subscribers::ordered_from_start(&world, seed).await;
    }
    let world = Arc::new(world);
    let mut tasks = JoinSet::new();
    start(&world, &mut tasks, seed);
    tokio::time::sleep(CHAOS).await;
    world.dice.calm();
    settle(&world).await;
    tasks.abort_all();
    check::judge(&world, seed).await
}

fn build(shape: Shape, seed: u64, plant: Option<Plant>) -> World {
    let clock = VirtualClock::start(EPOCH);
    let dice = Arc::new(Dice::new(seed ^ 0xc4a0_5eed, shape.rates));
    let gate = Arc::new(MemoryGate::default());
    let journal = Arc::new(Journal::new(gate.clone()));
    let store = Arc::new(MemoryReminderStore::new(4));
    let ledger = Arc::new(MemoryLedger::default());
    let dlq = Arc::new(MemoryQueue::new(clock).with_stale_handles(shape.stale_handles));
    let queue = MemoryQueue::new(clock)
        .with_redrive(shape.max_receive_count, dlq.clone())
        .with_stale_handles(shape.stale_handles);
    let queue = Arc::new(queue);
    let owners = Arc::new(Mutex::new(BTreeMap::new()));
    let retention = Retention(RETENTION);
    let consumer_cfg = ConsumerConfig {
        max_receive_count: shape.max_receive_count,
        emit_metrics: false,
        retention,
        ..ConsumerConfig::default()
    };
    // A third of the worlds run a newer writer than their events function (issue 32).
    let tap = Arc::new(Tap::new(seed % 3 == 1, plant));
    let acks = Arc::new(Acks::default());
    let watch = {
        let (acks, journal) = (acks.clone(), journal.clone());
        Arc::new(move |r: &Reminder| acks.landed(&journal, r))
    };
    let (prompter, prompts) = tokio::sync::mpsc::unbounded_channel();
    let provider = |channel: Channel| {
        Arc::new(ChaosProvider {
            idempotent: *shape.idempotent.get(channel),
            dice: dice.clone(),
            journal: journal.clone(),
            clock,
            store: store.clone(),
            owners: owners.clone(),
            misbehaviour: shape.misbehaviour,
            outage: outage(seed, channel),
            timeout: consumer_cfg.provider_timeout,
            plant,
            gone_after_ambiguous: shape.windows.gone_after_ambiguous,
            doomed: std::sync::Mutex::default(),
            accepted: shape.windows.edit_after_accept.then(|| prompter.clone()),
        })
    };
    let ports = PortSet {
        clock,
        reminders: Arc::new(
            Chaotic::new(store.clone(), dice.clone())
                .planted(plant)
                .watched(watch)
                .prompting(shape.windows.edit_in_scan.then(|| prompter.clone())),
        ),
        ledger: Arc::new(Chaotic::new(
            Observed {
                inner: ledger.clone(),
                journal: journal.clone(),
                tap: tap.clone(),
                clock,
                plant,
                ttl_lag_secs: shape.ttl_lag_secs,
                died: shape.windows.add_after_death.then(|| prompter.clone()),
            },
            dice.clone(),
        )),
        gate: Arc::new(
            Chaotic::new(gate.clone(), dice.clone())
                .planted(plant)
                .probing_slowly(shape.windows.probe_near_end.then(|| prompter.clone())),
        ),
        queue: Arc::new(
            Chaotic::new(queue, dice.clone())
                .planted(plant)
                .hearing(counting_receives(&journal)),
        ),
        dead_letters: Arc::new(Chaotic::new(dlq.clone(), dice.clone()).planted(plant)),
        providers: PerChannel::from_fn(provider),
    };
    World {
        shape,
        clock,
        dice,
        journal,
        store,
        ledger,
        dlq,
        ports,
        urls: PerChannel::from_fn(|c| format!("http://chaos/000000000000/reminders-{c}")),
        ids: Vec::new(),
        owners,
        invalid_ids: Mutex::new(BTreeSet::new()),
        cancel_requests: Mutex::new(BTreeSet::new()),
        consumer_cfg,
        plant,
        retention,
        acks,
        fresh_at_start: Vec::new(),
        counts: super::surface::Counts::default(),
        tap,
        bus: Arc::new(MemoryBus::default()),
        alarms: Mutex::default(),
        prompts: Mutex::new(Some(prompts)),
    }
}

/// The journal counts every message a receive handed out, as the queue does.
fn counting_receives(journal: &Arc<Journal>) -> super::inject::Heard {
    let journal = journal.clone();
    Arc::new(move |got: &[crate::ports::ReceivedMessage]| {
        for m in got {
            if let Ok(msg) = crate::domain::DeliveryMessage::decode(&m.body) {
                journal.received(&msg.delivery_key);
            }
        }
    })
}

/// An outage of each channel's provider somewhere in the fault phase, from five minutes to an
/// hour: longer than a fixed retry schedule, often longer than a reminder's freshness (it
/// ends with the fault phase at the latest).
fn outage(seed: u64, channel: Channel) -> (Timestamp, Timestamp) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x07a6e ^ channel as u64);
    let from = EPOCH.plus(Duration::from_secs(rng.random_range(0..CHAOS.as_secs())));
    let length = Duration::from_secs(rng.random_range(300..=3_600));
    (from, from.plus(length))
}

pub(super) fn recipient(channel: Channel, i: u32) -> Recipient {
    let raw = match channel {
        Channel::Push => format!("device-{i:08}"),
        Channel::Email => format!("person{i}@example.com"),
        Channel::Sms => format!("+1415555{i:04}"),
    };
    Recipient::parse(channel, &raw).unwrap_or_else(|_| unreachable!("chaos recipient {raw}"))
}

async fn seed_reminders(world: &mut World, rng: &mut StdRng) {
    use crate::ports::ReminderStore;
    let mut ids = Vec::new();
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
            fresh_until: Some(due.plus(Duration::from_secs(rng.random_range(300..3_600)))),
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

/// Remember which reminder each of its possible delivery keys belongs to.
fn own(world: &World, r: &Reminder) {
    let mut owners = crate::ports::faults::lock(&world.owners);
    for channel in Channel::ALL {
        let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
        owners.insert(key, r.reminder_id.clone());
    }
}

fn start(world: &Arc<World>, tasks: &mut JoinSet<()>, seed: u64) {
    let schedulers = if world.shape.twin_scheduler { 2 } else { 1 };
    for n in 0..schedulers {
        tasks.spawn_local(schedule(world.clone(), n));
    }
    for channel in Channel::ALL {
        for n in 0..world.shape.workers {
            let consumer = Consumer::new(
                world.ports.clone(),
                world.consumer_cfg.clone(),
                world.urls.clone(),
                seed ^ (u64::from(n) << 8) ^ channel as u64,
            )
            .with_suppression_key(Some(suppression_key()));
            tasks.spawn_local(event_source(world.clone(), consumer, channel));
        }
    }
    tasks.spawn_local(super::surface::redrives(world.clone(), seed));
    if world.shape.twin_redrive {
        tasks.spawn_local(super::surface::redrives(world.clone(), seed ^ 0x7317));
    }
    tasks.spawn_local(super::surface::operator(world.clone(), seed));
    tasks.spawn_local(super::surface::application(world.clone(), seed));
    if let Some(prompts) = crate::ports::faults::lock(&world.prompts).take() {
        tasks.spawn_local(super::surface::prompted(world.clone(), prompts, seed));
    }
    let bus = Arc::new(Chaotic::new(world.bus.clone(), world.dice.clone()).planted(world.plant));
    tasks.spawn_local(super::events::stream_to_bus(world.tap.clone(), bus));
    tasks.spawn_local(super::subscribers::change_their_minds(world.clone(), seed));
}

/// Suppressions are kept in every world: a 410 suppresses the address.
fn suppression_key() -> crate::providers::secret::SuppressionKeySource {
    let key = crate::domain::SuppressionKey::new(b"chaos-suppression-key".to_vec())
        .unwrap_or_else(|_| unreachable!("a key of 21 bytes"));
    crate::providers::secret::SuppressionKeySource::Fixed(key)
}

/// EventBridge Scheduler: a run every minute (a twin runs off-beat, as a double schedule).
async fn schedule(world: Arc<World>, n: u64) {
    let cfg = SchedulerConfig {
        retention: world.retention,
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::new(world.ports.clone(), cfg);
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
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
}

/// One worker of a channel's event source mapping: receive, invoke the consumer, delete what
/// succeeded; an empty receive waits (long polling).
async fn event_source(world: Arc<World>, consumer: Consumer<ChaosPorts>, channel: Channel) {
    loop {
        let polled = invoke(poll(&world, &consumer, channel), FUNCTION_TIMEOUT).await;
        if polled != Some(true) {
            let idle = world.dice.range(1, 20);
            tokio::time::sleep(Duration::from_secs(idle)).await;
        }
    }
}

async fn poll(world: &World, consumer: &Consumer<ChaosPorts>, channel: Channel) -> bool {
    let queue = &world.ports.queue;
    let got = match queue
        .receive(channel, 10, world.shape.visibility_secs)
        .await
    {
        Ok(got) if !got.is_empty() => got,
        _ => return false,
    };
    if world.plant == Some(Plant::AckBeforeOutcome) {
        for m in &got {
            let _ = queue.delete(channel, &m.receipt_handle).await;
        }
    }
    let arn = arn_for_url(world.urls.get(channel), "local");
    let deadline = world.clock.now().plus(FUNCTION_TIMEOUT);
    let out = consumer
        .handle(to_sqs_event(&arn, &got), Some(deadline))
        .await;
    let m = out.metrics.get(channel);
    let alarmed = u64::from(m.invariant_errors + m.panics);
    *crate::ports::faults::lock(&world.alarms)
        .entry(channel)
        .or_default() += alarmed;
    let failed: BTreeSet<&str> = out
        .response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    for m in got
        .iter()
        .filter(|m| !failed.contains(m.message_id.as_str()))
    {
        let _ = queue.delete(channel, &m.receipt_handle).await;
    }
    true
}

/// Wait, once the faults stop, until nothing is pending anywhere (and a late acceptance has
/// had its time) and every reminder's `fresh_until` has passed, or the settling time runs
/// out.
async fn settle(world: &World) {
    let give_up = world.clock.now().plus(SETTLE_BY);
    while world.clock.now() < give_up {
        tokio::time::sleep(Duration::from_secs(60)).await;
        if last_deadline(world).await > world.clock.now() {
            continue;
        }
        if matches!(crate::local::nothing_pending(&world.ports).await, Ok(true)) {
            tokio::time::sleep(Duration::from_secs(300)).await;
            if matches!(crate::local::nothing_pending(&world.ports).await, Ok(true)) {
                return;
            }
        }
    }
}

/// The latest `fresh_until` of the world's reminders as stored.
async fn last_deadline(world: &World) -> Timestamp {
    use crate::ports::ReminderStore;
    let mut last = EPOCH;
    for id in &world.ids {
        if let Ok(Some(r)) = world.store.get(id).await {
            last = last.max(r.fresh_until);
        }
    }
    last
}

/// Tell the journal which deliveries an answered cancel settled: a send that starts after
/// this is a send after the cancel, whatever the ledger came to say.
pub(super) async fn heard(
    world: &World,
    id: &ReminderId,
    answer: Result<Option<outbox::CancelReport>, outbox::OutboxError>,
) {
    use crate::delivery::state::Status;
    use crate::delivery::Cancelled;
    use crate::ports::ReminderStore;
    let Ok(Some(report)) = answer else {
        return;
    };
    let Ok(Some(r)) = world.store.get(id).await else {
        return;
    };
    let now = world.clock.now();
    for (channel, answer) in report.deliveries {
        let settled = matches!(
            answer,
            Cancelled::Cancelled | Cancelled::AlreadyFinal(Status::Cancelled | Status::Expired)
        );
        if settled {
            let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
            world.journal.cancel_answered(&key, now);
        }
    }
}

/// A stored item no reminder API would write: fresh until before it is due.
pub(super) async fn invalid_item(world: &World, t: u64) {
    use crate::ports::ReminderStore;
    let Ok(id) = ReminderId::parse(format!("bad-{t}")) else {
        return;
    };
    let due = world.clock.now().plus(Duration::from_secs(30));
    let new = NewReminder {
        reminder_id: id.clone(),
        subscriber_id: SubscriberId::parse("s-bad").unwrap_or_else(|_| unreachable!()),
        due_at: due,
        fresh_until: Some(due.plus(Duration::from_secs(60))),
        content: Content::Text {
            subject: "Reminder".into(),
            body: "bad".into(),
        },
        recipients: vec![recipient(Channel::Sms, 9_999)],
    };
    let Ok(mut r) = Reminder::new(new, Duration::from_secs(3600), Retention::default().0) else {
        return;
    };
    r.fresh_until = due.minus(Duration::from_secs(1));
    if world.store.insert(&r).await.is_ok() {
        crate::ports::faults::lock(&world.invalid_ids).insert(id);
    }
}
