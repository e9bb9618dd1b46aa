//! One seeded world as built: its shape drawn from the seed (the faults' rates, the windows it
//! lines up, the providers' misbehaviour), and the ports, clock, journal and checker's records
//! the deployed wiring runs on. Its life is [`super::run`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::acks::Acks;
use super::adapter::{Adapter, Chaotic};
use super::dice::Dice;
use super::events::Tap;
use super::journal::Journal;
use super::observed::Observed;
use super::provider::ChaosProvider;
use super::seed::{Seed, Stream};
pub(super) use super::shape::{SchedulerKey, Shape, Windows};
use super::{Plant, VirtualClock, Worlds};
use crate::around::Around;
use crate::stack::MemoryStack;
use reminders_core::clock::Timestamp;
use reminders_core::consumer::ConsumerConfig;
use reminders_core::domain::{
    Channel, DeliveryKey, PerChannel, Recipient, Reminder, ReminderId, Retention,
};
use reminders_core::ports::{
    MemoryBus, MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore, PortSet,
};

/// The world's retention: past `fresh_until`, a ledger item lives this long.
const RETENTION: Duration = Duration::from_secs(2 * 3600);

pub(super) const EPOCH: Timestamp = Timestamp::from_millis(1_700_000_000_000);
/// How long faults strike; then the world must settle.
pub(super) const CHAOS: Duration = Duration::from_secs(40 * 60);
/// Settled by then, or what is left is lost.
pub(super) const SETTLE_BY: Duration = Duration::from_secs(12 * 3600);
pub(super) const FUNCTION_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) type ChaosPorts = PortSet<
    VirtualClock,
    Arc<Chaotic<Arc<MemoryReminderStore>>>,
    Arc<Around<Arc<MemoryLedger>, Observed<VirtualClock>>>,
    Arc<Chaotic<Arc<MemoryGate>>>,
    Arc<Chaotic<Arc<MemoryQueue<VirtualClock>>>>,
    Arc<Chaotic<Arc<MemoryQueue<VirtualClock>>>>,
    Arc<ChaosProvider>,
>;

pub(super) struct World {
    /// The world's seed: every part that draws at random draws from its own stream of it.
    pub seed: Seed,
    /// Up to how far each consumer worker's clock is off the world's ([`Worlds`]).
    pub worker_skew_ms: u32,
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
    pub counts: super::acks::Counts,
    pub tap: Arc<Tap>,
    pub bus: Arc<MemoryBus>,
    /// Per channel: what the consumer's alarmed metrics counted (invariant errors, panics).
    pub alarms: Mutex<BTreeMap<Channel, u64>>,
    /// The consumers' one-read claims, and of them the ones given back (their metrics).
    pub one_reads: Mutex<(u64, u64)>,
    /// What the application answers at the windows' moments (taken when the world starts).
    pub prompts: Mutex<Option<super::prompt::Prompts>>,
    /// What the application was told of its series (series worlds).
    pub series: super::books::Books,
    /// Addresses the provider answers `503` until the operator fixes them (heads that die out of
    /// budget).
    pub failing: super::provider::Failing,
    /// A newer version writing the ledger beside this one (a third of the worlds).
    pub newer: Option<Arc<super::newer::Newer>>,
}

/// The due index's shards in every world (a change redraws every world).
const DUE_SHARDS: u32 = 4;

pub(super) fn build(shape: Shape, seed: Seed, worlds: Worlds) -> World {
    let plant = worlds.plant;
    let clock = VirtualClock::start(EPOCH);
    let dice = Arc::new(Dice::new(seed.of(Stream::Dice), shape.rates));
    let gate = Arc::new(MemoryGate::default());
    // Two workers' clocks may disagree by twice the skew: each is off the world's either way.
    let disagree = Duration::from_millis(2 * u64::from(worlds.worker_skew_ms));
    let journal = Arc::new(Journal::new(gate.clone(), disagree));
    let dlq = Arc::new(MemoryQueue::new(clock).with_stale_handles(shape.stale_handles));
    let queue = MemoryQueue::new(clock)
        .with_redrive(shape.max_receive_count, dlq.clone())
        .with_stale_handles(shape.stale_handles);
    let stack = MemoryStack {
        clock,
        store: Arc::new(MemoryReminderStore::new(DUE_SHARDS)),
        ledger: Arc::new(MemoryLedger::default()),
        gate,
        queue: Arc::new(queue),
        dlq,
    };
    let MemoryStack { store, ledger, .. } = stack.clone();
    let owners = Arc::new(Mutex::new(BTreeMap::new()));
    let retention = Retention(RETENTION);
    let consumer_cfg = ConsumerConfig {
        max_receive_count: shape.max_receive_count,
        emit_metrics: false,
        retention,
        policy: retry_policy(&shape),
        sms_countries: match plant {
            Some(Plant::IgnoreCountries) => reminders_core::domain::SmsCountries::Any,
            _ => reminders_core::domain::SmsCountries::default(),
        },
        ..ConsumerConfig::default()
    };
    // A third of the worlds run a newer writer than their events function.
    let tap = Arc::new(Tap::new(seed.with_a_newer_writer(), plant));
    let newer = super::newer::Newer::in_world(seed).map(Arc::new);
    let acks = Arc::new(Acks::default());
    let watch = {
        let (acks, journal, owners) = (acks.clone(), journal.clone(), owners.clone());
        Arc::new(move |r: &Reminder| {
            // Whose each key is, for reminders made mid-run too (a series' occurrences).
            let mut o = reminders_core::sync::lock(&owners);
            for c in r.listed_channels() {
                o.entry(DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, c))
                    .or_insert_with(|| r.reminder_id.clone());
            }
            drop(o);
            acks.landed(&journal, r)
        })
    };
    let (prompter, prompts) = tokio::sync::mpsc::unbounded_channel();
    let failing = super::provider::Failing::default();
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
            failing: failing.clone(),
        })
    };
    let ports = stack
        .ports_with(PerChannel::from_fn(provider))
        .map_reminders(|table| {
            Arc::new(
                Adapter::new(table, dice.clone())
                    .planted(plant)
                    .expiring(clock, reminders_ttl_lag(seed))
                    .watched(watch)
                    .prompting(shape.windows.edit_in_scan.then(|| prompter.clone()))
                    .prompting_enqueues(shape.windows.readd_after_remove.then(|| prompter.clone()))
                    .port(),
            )
        })
        .map_ledger(|inner| {
            Arc::new(Around::new(
                inner,
                Observed {
                    ledger: ledger.clone(),
                    dice: dice.clone(),
                    journal: journal.clone(),
                    tap: tap.clone(),
                    clock,
                    plant,
                    ttl_lag_secs: shape.ttl_lag_secs,
                    died: shape.windows.add_after_death.then(|| prompter.clone()),
                    claimed: shape.windows.reorder_after_claim.then(|| prompter.clone()),
                    spent: shape.windows.spent_then_fallback.then(|| prompter.clone()),
                    newer: newer.clone(),
                },
            ))
        })
        .map_gate(|inner| {
            Arc::new(
                Adapter::new(inner, dice.clone())
                    .planted(plant)
                    .probing_slowly(shape.windows.probe_near_end.then(|| prompter.clone()))
                    .port(),
            )
        })
        .map_queue(|inner| {
            Arc::new(
                Adapter::new(inner, dice.clone())
                    .planted(plant)
                    .hearing(counting_receives(&journal))
                    .port(),
            )
        })
        .map_dead_letters(|inner| {
            Arc::new(Adapter::new(inner, dice.clone()).planted(plant).port())
        });
    let dlq = stack.dlq;
    World {
        seed,
        worker_skew_ms: worlds.worker_skew_ms,
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
        counts: super::acks::Counts::default(),
        tap,
        bus: Arc::new(MemoryBus::default()),
        alarms: Mutex::default(),
        one_reads: Mutex::default(),
        prompts: Mutex::new(Some(prompts)),
        series: Default::default(),
        failing,
        newer,
    }
}

/// How long after its TTL a reminder item goes: drawn apart from the ledger's (each table's TTL
/// deletes on its own), from its own dice so that the rest of the shape stays as it was.
fn reminders_ttl_lag(seed: Seed) -> i64 {
    seed.rng(Stream::ReminderTtlLag).random_range(0..600)
}

/// The deployed retry policy. The worlds where heads die out of budget deploy a budget of three
/// attempts a minute or so apart (not fitted to the freshness, which keeps the last one for near
/// its end), so that an address the provider fails spends it well before the reminder goes stale.
fn retry_policy(shape: &Shape) -> reminders_core::policy::RetryPolicy {
    let default = reminders_core::policy::RetryPolicy::default();
    if !shape.windows.spent_then_fallback {
        return default;
    }
    reminders_core::policy::RetryPolicy {
        max_attempts: 3,
        backoff: reminders_core::policy::Backoff::Exponential {
            base_secs: 30,
            cap_secs: 90,
        },
        ..default
    }
}

/// The journal counts every message a receive handed out, as the queue does.
fn counting_receives(journal: &Arc<Journal>) -> super::adapter::Heard {
    let journal = journal.clone();
    Arc::new(move |got: &[reminders_core::ports::ReceivedMessage]| {
        for m in got {
            if let Ok(msg) = reminders_core::domain::DeliveryMessage::decode(&m.body) {
                journal.received(&msg.delivery_key);
            }
        }
    })
}

/// An outage of each channel's provider somewhere in the fault phase, from five minutes to an
/// hour: longer than a fixed retry schedule, often longer than a reminder's freshness (it
/// ends with the fault phase at the latest).
fn outage(seed: Seed, channel: Channel) -> (Timestamp, Timestamp) {
    let mut rng = StdRng::seed_from_u64(seed.of(Stream::Outage) ^ channel as u64);
    let from = EPOCH.plus(Duration::from_secs(rng.random_range(0..CHAOS.as_secs())));
    let length = Duration::from_secs(rng.random_range(300..=3_600));
    (from, from.plus(length))
}

/// The SMS number of subscriber `i` abroad (`+44`, outside the deployed allow-list): an edit
/// moves a reminder's number there now and then.
pub(super) fn abroad(i: u32) -> Recipient {
    let raw = format!("+447700900{:03}", i % 1_000);
    Recipient::parse(Channel::Sms, &raw).unwrap_or_else(|_| unreachable!("chaos recipient {raw}"))
}

pub(super) fn recipient(channel: Channel, i: u32) -> Recipient {
    let raw = match channel {
        Channel::Push => format!("device-{i:08}"),
        Channel::Email => format!("person{i}@example.com"),
        Channel::Sms => format!("+1415555{i:04}"),
    };
    Recipient::parse(channel, &raw).unwrap_or_else(|_| unreachable!("chaos recipient {raw}"))
}

/// The world's recipients are per subscriber (`s-0` … `s-2`), so a dead address is shared by
/// every reminder of its subscriber.
pub(super) fn subscriber_index(r: &Reminder) -> u32 {
    r.subscriber_id
        .as_str()
        .trim_start_matches("s-")
        .parse()
        .unwrap_or(0)
}
