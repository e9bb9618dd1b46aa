//! [`Adapter`]: the chaos world's model of an adapter, a [`Hook`] around the in-memory port: the
//! world's faults ([`Dice`]) around each call, a write the SDK sends again, the plants of the
//! adapter, and what it tells the checker (each version of a reminder that lands, each receive)
//! and the application (the windows' prompts). The reminders table's model is in [`reminders`]
//! (its series in [`super::series`]), the queues' in [`super::queues`], the bus's in
//! [`super::events`]; the ledger's is [`super::observed::Observed`].

use std::any::Any;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::dice::{freeze, Dice};
use super::prompt::Prompter;
use super::Plant;
use crate::around::{cast, read, Around, Call, Hook, Next, Value};
use reminders_core::domain::{DeliveryKey, Reminder};
use reminders_core::ports::gate::{BreakerChange, GateState};
use reminders_core::ports::{MemoryGate, PortError, ReceivedMessage};

mod reminders;

/// A port of the world: the in-memory store, around its adapter's model.
pub type Chaotic<S> = Around<S, Adapter<S>>;

/// The model of one adapter, around the in-memory `store` it models (the same store the
/// [`Around`] wraps: a model whose plant rewrites a request, or that reads the item before a
/// write, makes that call on the store itself). It is the innermost hook of its port: a hook
/// inside it would not see the calls it makes on the store itself.
pub struct Adapter<S> {
    pub store: S,
    pub dice: Arc<Dice>,
    /// A planted bug of this adapter, if any.
    pub plant: Option<super::Plant>,
    /// Keys whose messages [`super::Plant::LoseFallbackMessages`] loses.
    pub(super) losing: Mutex<std::collections::BTreeSet<DeliveryKey>>,
    /// Told of every version of a reminder that lands (a reminders table's writes).
    pub(super) watch: Option<Watch>,
    /// Told of every message a queue's receive hands out, its answer lost or not.
    pub(super) heard: Option<Heard>,
    /// Told of the windows' moments: every due page a reminders adapter reads (before the
    /// reader goes on), every breaker a gate adapter opens (whose probe writes are then slow,
    /// up to the storage timeout: the almost-stale probes' worlds).
    pub(super) prompts: Option<Prompter>,
    /// Told of every reminder a reminders adapter marks enqueued (the worlds where a channel is
    /// edited away and listed again).
    pub(super) enqueues: Option<Prompter>,
    /// Each series' version before its last write: what a lagging index answers.
    pub(super) lagging: Mutex<
        std::collections::BTreeMap<
            reminders_core::domain::SeriesId,
            reminders_core::domain::series::Series,
        >,
    >,
    /// A reminders table's TTL, if the adapter keeps one ([`Ttl`]).
    pub(super) ttl: Option<Ttl>,
}

/// DynamoDB's TTL on the reminders table as the system meets it: an item past its `expires_at`
/// by the table's lag is deleted, gone for every reader, a conditional write on it finds nothing,
/// and a create of its id creates it anew (the maker reaching an instant whose occurrence was made
/// on its own and has expired). The memory store keeps the item until such a create, for the
/// checker. (The due index is not filtered: an item still scheduled two hours past its freshness
/// never stays there, the scheduler expires it first.)
pub(super) struct Ttl {
    pub clock: super::VirtualClock,
    pub lag_secs: i64,
}

impl Ttl {
    /// Whether the table's TTL has deleted `r` by now.
    pub(super) fn gone(&self, r: &Reminder) -> bool {
        use reminders_core::clock::Clock;
        let now = self.clock.now().as_millis().div_euclid(1000);
        r.expires_at.saturating_add(self.lag_secs) < now
    }
}

/// What a heard queue adapter tells of each receive that took effect.
pub type Heard = Arc<dyn Fn(&[ReceivedMessage]) + Send + Sync>;

/// What a watched reminders adapter tells of each version that lands.
pub type Watch = Arc<dyn Fn(&Reminder) + Send + Sync>;

impl<S: Clone> Adapter<S> {
    /// The world's port: the store, around this model.
    pub fn port(self) -> Chaotic<S> {
        Around::new(self.store.clone(), self)
    }
}

impl<S> Adapter<S> {
    pub fn new(store: S, dice: Arc<Dice>) -> Self {
        Self {
            store,
            dice,
            plant: None,
            losing: Mutex::default(),
            watch: None,
            heard: None,
            prompts: None,
            enqueues: None,
            lagging: Mutex::default(),
            ttl: None,
        }
    }

    /// A reminders adapter whose table deletes each item `lag_secs` after its TTL.
    pub(super) fn expiring(mut self, clock: super::VirtualClock, lag_secs: i64) -> Self {
        self.ttl = Some(Ttl { clock, lag_secs });
        self
    }

    /// Whether the table's TTL has deleted `r` by now (never, without one).
    pub(super) fn ttl_gone(&self, r: &Reminder) -> bool {
        self.ttl.as_ref().is_some_and(|t| t.gone(r))
    }

    /// A gate whose probe writes take 1 s to the storage timeout, whose breaker openings
    /// prompt the application: it shortens a waiting reminder's freshness to end just after the
    /// cool-down, so a probe starts almost stale.
    pub fn probing_slowly(mut self, prompts: Option<super::prompt::Prompter>) -> Self {
        self.prompts = prompts;
        self
    }

    /// Prompt the application with each due page read: it may edit a stale reminder of the page
    /// before the scheduler goes on.
    pub fn prompting(mut self, prompts: Option<super::prompt::Prompter>) -> Self {
        self.prompts = prompts;
        self
    }

    /// Prompt the application with each reminder marked enqueued: it may take a channel away at
    /// once, and list it again minutes later.
    pub fn prompting_enqueues(mut self, prompts: Option<super::prompt::Prompter>) -> Self {
        self.enqueues = prompts;
        self
    }

    /// Tell `heard` of every receive that took effect: SQS counts a receive whose answer
    /// was lost, so the checker must too.
    pub fn hearing(mut self, heard: Heard) -> Self {
        self.heard = Some(heard);
        self
    }

    pub fn watched(mut self, watch: Watch) -> Self {
        self.watch = Some(watch);
        self
    }

    fn landed(&self, r: &Reminder) {
        if let Some(w) = &self.watch {
            w(r);
        }
    }

    pub fn planted(mut self, plant: Option<super::Plant>) -> Self {
        self.plant = plant;
        self
    }
}

/// `next`'s answer read as the type `T` its call answers.
pub(super) async fn typed<T: Any, R: Any>(
    next: impl Future<Output = Result<R, PortError>>,
) -> Result<T, PortError> {
    next.await.map(cast)
}

/// The gate's model: the dice around each call, the breaker hidden by
/// [`super::Plant::HideBreaker`], each opening told to the application, and a won probe slow
/// up to the storage timeout in the almost-stale probes' worlds.
impl Hook for Adapter<Arc<MemoryGate>> {
    async fn around<R: Value>(&self, call: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        let answer = self.dice.around(call.name(), next()).await?;
        match call {
            Call::GateState { .. } | Call::Failed { .. } => {
                let mut state: GateState = cast(answer);
                if self.plant == Some(super::Plant::HideBreaker) {
                    state.breaker = None;
                }
                Ok(cast(state))
            }
            Call::Breaker { partition, change } => {
                self.breaker_changed(partition.channel, *change, *read(&answer))
                    .await;
                Ok(answer)
            }
            _ => Ok(answer),
        }
    }
}

impl Adapter<Arc<MemoryGate>> {
    async fn breaker_changed(
        &self,
        channel: reminders_core::domain::Channel,
        change: BreakerChange,
        won: bool,
    ) {
        match (change, won) {
            (BreakerChange::Open { until, .. } | BreakerChange::Reopen { until, .. }, true) => {
                let what = super::prompt::Prompt::BreakerOpened(channel, until);
                super::prompt::tell(self.prompts.as_ref(), what);
            }
            (BreakerChange::Probe { now, .. }, true) => {
                if self.prompts.is_some() {
                    let slow = reminders_core::ports::STORAGE_OPERATION_TIMEOUT.as_millis() as u64;
                    tokio::time::sleep(Duration::from_millis(self.dice.range(1_000, slow))).await;
                }
                // The last look then reads the time from before the write, until the send.
                if self.plant == Some(super::Plant::StaleLastLook) {
                    freeze(Some(now));
                }
            }
            _ => {}
        }
    }
}

/// What a planted reminders adapter writes instead of `r` over `stored`.
pub fn planted_write(plant: Plant, stored: &Reminder, r: &Reminder) -> Reminder {
    let mut w = r.clone();
    match plant {
        Plant::DropFreshnessEdit if w.due_at == stored.due_at => {
            w.fresh_until = stored.fresh_until;
        }
        Plant::DropAddedChannels => {
            w.recipients
                .retain(|c, _| stored.recipients.contains_key(c));
            if w.recipients.is_empty() {
                w.recipients = r.recipients.clone();
            }
        }
        _ => {}
    }
    w
}
