//! [`Chaotic`]: any port with the world's faults ([`Dice`]) around each of its calls, the
//! plants of its adapter, and what it tells the checker (each version of a reminder that lands,
//! each receive) and the application (the windows' prompts). The queues' side is in
//! [`super::queues`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::dice::{freeze, Dice};
use super::prompt::Prompter;
use super::Plant;
use reminders_core::clock::Timestamp;
use reminders_core::domain::{DeliveryKey, Reminder, ReminderId, ReminderStatus};
use reminders_core::ledger::DeliveryRecord;
use reminders_core::ports::gate::{BreakerChange, GateState};
use reminders_core::ports::{
    Cas, DuePage, DueQuery, Expected, Gate, GatePartition, Inserted, Ledger, Marked, PortError,
    ReceivedMessage, ReminderStore,
};

mod reminders;
/// A port with the world's faults around each of its calls.
pub struct Chaotic<T> {
    pub inner: T,
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

impl<T> Chaotic<T> {
    pub fn new(inner: T, dice: Arc<Dice>) -> Self {
        Self {
            inner,
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

    /// Whether the item stored under `id` is gone with its TTL.
    async fn expired(&self, id: &ReminderId) -> Result<bool, PortError>
    where
        T: ReminderStore,
    {
        let Some(ttl) = &self.ttl else {
            return Ok(false);
        };
        Ok(self.inner.get(id).await?.is_some_and(|r| ttl.gone(&r)))
    }

    pub fn planted(mut self, plant: Option<super::Plant>) -> Self {
        self.plant = plant;
        self
    }
}

impl<T: Ledger> Ledger for Chaotic<T> {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        self.dice
            .around(reminders_core::ports::ledger::OP_GET, self.inner.get(key))
            .await
    }
    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        let call = self.sent_again(|| self.inner.put_if(record, expected.clone()));
        self.dice
            .around(reminders_core::ports::ledger::OP_PUT, call)
            .await
    }
    async fn delete_if(&self, key: &DeliveryKey, expected: Expected) -> Result<Cas, PortError> {
        let call = self.sent_again(|| self.inner.delete_if(key, expected.clone()));
        self.dice
            .around(reminders_core::ports::ledger::OP_DELETE, call)
            .await
    }
}

impl<T> Chaotic<T> {
    /// A conditional write that took effect may be sent again by the SDK
    /// ([`Dice::retries_write`]): the caller hears the retry's answer (a conflict with the item
    /// its own first try wrote, or with what another writer wrote meanwhile).
    async fn sent_again<F, W>(&self, write: W) -> Result<Cas, PortError>
    where
        W: Fn() -> F,
        F: std::future::Future<Output = Result<Cas, PortError>>,
    {
        self.sent_again_if(write, |c| *c == Cas::Applied).await
    }

    /// [`Chaotic::sent_again`] for any conditional write: `applied` tells its answers that took
    /// effect.
    pub(super) async fn sent_again_if<R, F, W>(
        &self,
        write: W,
        applied: impl Fn(&R) -> bool,
    ) -> Result<R, PortError>
    where
        W: Fn() -> F,
        F: std::future::Future<Output = Result<R, PortError>>,
    {
        let first = write().await?;
        if !applied(&first) || !self.dice.retries_write() {
            return Ok(first);
        }
        self.dice.backoff().await;
        write().await
    }
}

impl<T: Gate> Gate for Chaotic<T> {
    async fn state(&self, p: &GatePartition) -> Result<GateState, PortError> {
        let mut state = self
            .dice
            .around(reminders_core::ports::gate::OP_GET, self.inner.state(p))
            .await?;
        if self.plant == Some(super::Plant::HideBreaker) {
            state.breaker = None;
        }
        Ok(state)
    }
    async fn throttle(&self, p: &GatePartition, until: Timestamp) -> Result<(), PortError> {
        self.dice
            .around(
                reminders_core::ports::gate::OP_THROTTLE,
                self.inner.throttle(p, until),
            )
            .await
    }
    async fn failed(&self, p: &GatePartition, now: Timestamp) -> Result<GateState, PortError> {
        let mut state = self
            .dice
            .around(
                reminders_core::ports::gate::OP_FAILED,
                self.inner.failed(p, now),
            )
            .await?;
        if self.plant == Some(super::Plant::HideBreaker) {
            state.breaker = None;
        }
        Ok(state)
    }
    async fn breaker(&self, p: &GatePartition, change: BreakerChange) -> Result<bool, PortError> {
        let won = self
            .dice
            .around(
                reminders_core::ports::gate::OP_BREAKER,
                self.inner.breaker(p, change),
            )
            .await?;
        match (change, won) {
            (BreakerChange::Open { until, .. } | BreakerChange::Reopen { until, .. }, true) => {
                let what = super::prompt::Prompt::BreakerOpened(p.channel, until);
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
        Ok(won)
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
