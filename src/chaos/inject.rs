//! Faults at every port call, drawn from one seeded source: latency, a failure before the
//! effect, a throttle, a crash of the invocation before or after the effect, and a lost
//! response after it. [`Chaotic`] wraps any port with them; [`invoke`] runs an invocation that
//! a crash can stop at any of its port calls.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::sync::Notify;

use crate::clock::Timestamp;
use crate::deadletter::DeadLetter;
use crate::delivery::state::DeliveryRecord;
use crate::domain::{Channel, DeliveryKey, Reminder, ReminderId, ReminderStatus};
use crate::ports::gate::{BreakerChange, GateState};
use crate::ports::{
    Cas, DeadLetterMessage, DeadLetters, DeliveryQueue, DuePage, DueQuery, Expected, Gate,
    GatePartition, Inserted, Ledger, Marked, OutgoingMessage, PortError, QueueDepth,
    ReceivedMessage, ReminderStore, SendFailure,
};

/// How often each fault strikes a port call (probabilities per call).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    pub latency: f64,
    pub fail_before: f64,
    pub throttle: f64,
    pub crash: f64,
    pub lost_response: f64,
    /// A received message is delivered a second time (SQS is at least once).
    pub duplicate: f64,
}

/// The one random source of a world's faults, and their count.
pub struct Dice {
    rng: Mutex<StdRng>,
    rates: Mutex<Rates>,
    calm: AtomicBool,
    injected: AtomicU64,
    /// For plants that strike once a world.
    struck: AtomicBool,
}

impl Dice {
    pub fn new(seed: u64, rates: Rates) -> Self {
        Self {
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            rates: Mutex::new(rates),
            calm: AtomicBool::new(false),
            injected: AtomicU64::new(0),
            struck: AtomicBool::new(false),
        }
    }

    /// Stop injecting: the world must then converge.
    pub fn calm(&self) {
        self.calm.store(true, Ordering::SeqCst);
    }

    pub fn is_calm(&self) -> bool {
        self.calm.load(Ordering::SeqCst)
    }

    /// False the first time it is asked in a world, true after (a plant that strikes once).
    pub fn once(&self) -> bool {
        self.struck.swap(true, Ordering::SeqCst)
    }

    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    pub fn count(&self) {
        self.injected.fetch_add(1, Ordering::SeqCst);
    }

    /// A fair draw in `[0, 1)`, whatever the calm.
    pub fn unit(&self) -> f64 {
        crate::ports::faults::lock(&self.rng).random()
    }

    pub fn range(&self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        crate::ports::faults::lock(&self.rng).random_range(lo..hi)
    }

    /// Whether a fault with this rate strikes now (never once calm); counted when it does.
    pub fn strikes(&self, rate: impl Fn(&Rates) -> f64) -> bool {
        if self.is_calm() {
            return false;
        }
        let p = rate(&crate::ports::faults::lock(&self.rates));
        let hit = p > 0.0 && self.unit() < p;
        if hit {
            self.count();
        }
        hit
    }

    async fn before(&self, op: &'static str) -> Result<(), PortError> {
        if self.strikes(|r| r.latency) {
            tokio::time::sleep(Duration::from_millis(self.range(100, 4_000))).await;
        }
        if self.strikes(|r| r.crash) {
            crash().await;
        }
        if self.strikes(|r| r.fail_before) {
            return Err(PortError::Unavailable {
                op,
                message: "chaos: failed before the effect".into(),
            });
        }
        if self.strikes(|r| r.throttle) {
            return Err(PortError::Throttled {
                op,
                message: "chaos: throttled".into(),
            });
        }
        Ok(())
    }

    async fn after(&self, op: &'static str) -> Result<(), PortError> {
        if self.strikes(|r| r.crash) {
            crash().await;
        }
        if self.strikes(|r| r.lost_response) {
            return Err(PortError::Unavailable {
                op,
                message: "chaos: response lost after the effect".into(),
            });
        }
        Ok(())
    }

    pub async fn around<R>(
        &self,
        op: &'static str,
        call: impl Future<Output = Result<R, PortError>>,
    ) -> Result<R, PortError> {
        self.before(op).await?;
        let out = call.await?;
        self.after(op).await?;
        Ok(out)
    }
}

tokio::task_local! {
    static INVOCATION: Arc<Notify>;
    /// [`super::Plant::StaleLastLook`]: the time the invocation's clock answers while a probe
    /// it won is on its way to the provider.
    static FROZEN: std::cell::Cell<Option<Timestamp>>;
}

/// The time this invocation's clock is stuck at, if a planted probe froze it.
pub fn frozen() -> Option<Timestamp> {
    FROZEN.try_with(std::cell::Cell::get).ok().flatten()
}

/// Stick (`Some`) or free (`None`) this invocation's clock.
pub fn freeze(at: Option<Timestamp>) {
    let _ = FROZEN.try_with(|f| f.set(at));
}

/// Stop the current invocation here (a Lambda killed mid-call): what it did so far stays done,
/// the rest never happens. Outside an invocation (an operator's command) nothing stops.
pub(super) async fn crash() {
    if INVOCATION.try_with(|kill| kill.notify_one()).is_ok() {
        std::future::pending::<()>().await;
    }
}

/// Run `work` as one invocation: `None` when a crash stopped it or it outlived `timeout`
/// (Lambda stops a function at its timeout, wherever it is).
pub async fn invoke<F: Future>(work: F, timeout: Duration) -> Option<F::Output> {
    let kill = Arc::new(Notify::new());
    let watch = kill.clone();
    let run = INVOCATION.scope(kill, async move {
        tokio::select! {
            biased;
            () = watch.notified() => None,
            () = tokio::time::sleep(timeout) => None,
            out = work => Some(out),
        }
    });
    FROZEN.scope(std::cell::Cell::new(None), run).await
}

/// A port with the world's faults around each of its calls.
pub struct Chaotic<T> {
    pub inner: T,
    pub dice: Arc<Dice>,
    /// A planted bug of this adapter, if any.
    pub plant: Option<super::Plant>,
    /// Keys whose messages [`super::Plant::LoseFallbackMessages`] loses.
    losing: Mutex<std::collections::BTreeSet<DeliveryKey>>,
    /// Told of every version of a reminder that lands (a reminders table's writes).
    watch: Option<Watch>,
    /// Told of every message a queue's receive hands out, its answer lost or not.
    heard: Option<Heard>,
    /// Told of the windows' moments: every due page a reminders adapter reads (before the
    /// reader goes on), every breaker a gate adapter opens (whose probe writes are then slow,
    /// up to the storage timeout: window 5's world).
    prompts: Option<super::surface::Prompter>,
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
        }
    }

    /// A gate whose probe writes take 1 s to the storage timeout, whose breaker openings
    /// prompt the application (window 5 of issue 32): it shortens a waiting reminder's
    /// freshness to end just after the cool-down, so a probe starts almost stale.
    pub fn probing_slowly(mut self, prompts: Option<super::surface::Prompter>) -> Self {
        self.prompts = prompts;
        self
    }

    /// Prompt the application with each due page read (window 1 of issue 32): it may edit a
    /// stale reminder of the page before the scheduler goes on.
    pub fn prompting(mut self, prompts: Option<super::surface::Prompter>) -> Self {
        self.prompts = prompts;
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

impl<T: ReminderStore> ReminderStore for Chaotic<T> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    async fn sweep_index(
        &self,
        after: Option<&crate::ports::SweepCursor>,
        limit: u32,
    ) -> Result<crate::ports::SweepPage, PortError> {
        let call = self.inner.sweep_index(after, limit);
        self.dice
            .around(crate::ports::reminders::OP_SWEEP, call)
            .await
    }
    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        let call = async {
            let out = self.inner.insert(r).await;
            if matches!(out, Ok(Inserted::Created)) {
                self.landed(r);
            }
            out
        };
        self.dice
            .around(crate::ports::reminders::OP_INSERT, call)
            .await
    }
    async fn replace(
        &self,
        r: &Reminder,
        version: u64,
        status: ReminderStatus,
    ) -> Result<Marked, PortError> {
        let planted = match self.plant {
            Some(p @ (super::Plant::DropFreshnessEdit | super::Plant::DropAddedChannels)) => {
                let stored = self.inner.get(&r.reminder_id).await?;
                stored.map(|stored| super::surface::planted_write(p, &stored, r))
            }
            _ => None,
        };
        let r = planted.as_ref().unwrap_or(r);
        let call = async {
            let out = self.inner.replace(r, version, status).await;
            if matches!(out, Ok(Marked::Marked)) {
                self.landed(r);
            }
            out
        };
        self.dice
            .around(crate::ports::reminders::OP_REPLACE, call)
            .await
    }
    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        let mut got = self
            .dice
            .around(crate::ports::reminders::OP_GET, self.inner.get(id))
            .await?;
        if let Some(r) = got.as_mut() {
            match self.plant {
                Some(super::Plant::LateFreshness) => {
                    r.fresh_until = r.fresh_until.plus(std::time::Duration::from_secs(86_400));
                }
                Some(super::Plant::EarlyFreshness) => {
                    r.fresh_until = r.fresh_until.minus(std::time::Duration::from_secs(3_600));
                }
                Some(super::Plant::LostCancel) if r.status == ReminderStatus::Cancelled => {
                    r.status = ReminderStatus::Enqueued;
                }
                _ => {}
            }
        }
        Ok(got)
    }
    async fn query_due(&self, q: &DueQuery<'_>) -> Result<DuePage, PortError> {
        let page = self
            .dice
            .around(crate::ports::reminders::OP_QUERY, self.inner.query_due(q))
            .await?;
        if !self.dice.is_calm() && !page.items.is_empty() {
            let ids = page
                .items
                .iter()
                .filter_map(|e| match e {
                    crate::ports::DueEntry::Due(r) => Some(r.reminder_id.clone()),
                    crate::ports::DueEntry::Unschedulable { .. } => None,
                })
                .collect();
            super::surface::prompt(self.prompts.as_ref(), super::surface::Prompt::Scanned(ids))
                .await;
        }
        Ok(page)
    }
    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        let call = self.inner.quarantine(key, reason);
        self.dice
            .around(crate::ports::reminders::OP_QUARANTINE, call)
            .await
    }
    async fn extend_freshness(
        &self,
        id: &ReminderId,
        version: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> Result<Marked, PortError> {
        let call = self
            .inner
            .extend_freshness(id, version, fresh_until, expires_at);
        self.dice
            .around(crate::ports::reminders::OP_EXTEND, call)
            .await
    }
    async fn mark(
        &self,
        id: &ReminderId,
        version: u64,
        to: ReminderStatus,
    ) -> Result<Marked, PortError> {
        // [`super::Plant::ExpireOverAnEdit`]: an expiry marks whatever version is stored.
        let version = match self.plant {
            Some(super::Plant::ExpireOverAnEdit) if to == ReminderStatus::Expired => {
                match self.inner.get(id).await? {
                    Some(cur) => cur.payload_version,
                    None => version,
                }
            }
            _ => version,
        };
        let call = self.inner.mark(id, version, to);
        self.dice
            .around(crate::ports::reminders::OP_MARK, call)
            .await
    }
    async fn preferences(
        &self,
        subscriber: &crate::domain::SubscriberId,
    ) -> Result<Option<crate::domain::Preferences>, PortError> {
        let call = self.inner.preferences(subscriber);
        let mut got = self
            .dice
            .around(crate::ports::reminders::OP_PREFERENCES, call)
            .await?;
        if let Some(p) = got.as_mut() {
            match self.plant {
                Some(super::Plant::IgnoreOptOuts) => p.opted_out.clear(),
                Some(super::Plant::IgnoreQuietHours) => p.quiet_hours.clear(),
                Some(super::Plant::IgnoreFallbackOrder) => p.fallback.clear(),
                _ => {}
            }
        }
        Ok(got)
    }
    async fn put_preferences(
        &self,
        subscriber: &crate::domain::SubscriberId,
        prefs: &crate::domain::Preferences,
    ) -> Result<(), PortError> {
        self.inner.put_preferences(subscriber, prefs).await
    }
    async fn suppression(
        &self,
        address: &crate::domain::AddressHash,
    ) -> Result<Option<crate::domain::Suppression>, PortError> {
        let call = self.inner.suppression(address);
        self.dice
            .around(crate::ports::reminders::OP_SUPPRESSION, call)
            .await
    }
    async fn put_suppression(&self, s: &crate::domain::Suppression) -> Result<(), PortError> {
        let call = self.inner.put_suppression(s);
        self.dice
            .around(crate::ports::reminders::OP_PUT_SUPPRESSION, call)
            .await
    }
}

impl<T: Ledger> Ledger for Chaotic<T> {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        self.dice
            .around(crate::ports::ledger::OP_GET, self.inner.get(key))
            .await
    }
    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        let call = self.inner.put_if(record, expected);
        self.dice.around(crate::ports::ledger::OP_PUT, call).await
    }
}

impl<T: Gate> Gate for Chaotic<T> {
    async fn state(&self, p: &GatePartition) -> Result<GateState, PortError> {
        let mut state = self
            .dice
            .around(crate::ports::gate::OP_GET, self.inner.state(p))
            .await?;
        if self.plant == Some(super::Plant::HideBreaker) {
            state.breaker = None;
        }
        Ok(state)
    }
    async fn throttle(&self, p: &GatePartition, until: Timestamp) -> Result<(), PortError> {
        self.dice
            .around(
                crate::ports::gate::OP_THROTTLE,
                self.inner.throttle(p, until),
            )
            .await
    }
    async fn failed(&self, p: &GatePartition, now: Timestamp) -> Result<GateState, PortError> {
        let mut state = self
            .dice
            .around(crate::ports::gate::OP_FAILED, self.inner.failed(p, now))
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
                crate::ports::gate::OP_BREAKER,
                self.inner.breaker(p, change),
            )
            .await?;
        match (change, won) {
            (BreakerChange::Open { until, .. } | BreakerChange::Reopen { until, .. }, true) => {
                let what = super::surface::Prompt::BreakerOpened(p.channel, until);
                super::surface::tell(self.prompts.as_ref(), what);
            }
            (BreakerChange::Probe { now, .. }, true) => {
                if self.prompts.is_some() {
                    let slow = crate::ports::STORAGE_OPERATION_TIMEOUT.as_millis() as u64;
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

impl<T: DeliveryQueue> DeliveryQueue for Chaotic<T> {
    async fn send_batch(
        &self,
        channel: Channel,
        messages: &[OutgoingMessage],
    ) -> Result<Vec<SendFailure>, PortError> {
        // A partial failure: SQS answers some entries failed, and sends the others.
        let (mut sent, mut failed) = (Vec::new(), Vec::new());
        let messages = self.lose_fallbacks(messages);
        for m in &messages {
            if self.dice.strikes(|r| r.fail_before / 2.0) {
                failed.push(SendFailure {
                    entry_id: m.entry_id.clone(),
                    sender_fault: false,
                    code: "InternalError".into(),
                });
            } else {
                sent.push(m.clone());
            }
        }
        if sent.is_empty() {
            return Ok(failed);
        }
        let call = self.inner.send_batch(channel, &sent);
        let mut out = self.dice.around(crate::ports::queue::OP_SEND, call).await?;
        out.extend(failed);
        Ok(out)
    }
    async fn change_visibility(
        &self,
        channel: Channel,
        handle: &str,
        secs: u32,
    ) -> Result<(), PortError> {
        let call = self.inner.change_visibility(channel, handle, secs);
        self.dice
            .around(crate::ports::queue::OP_VISIBILITY, call)
            .await
    }
    async fn delete(&self, channel: Channel, handle: &str) -> Result<(), PortError> {
        let call = self.inner.delete(channel, handle);
        self.dice.around(crate::ports::queue::OP_DELETE, call).await
    }
    async fn receive(
        &self,
        channel: Channel,
        max: u32,
        visibility_secs: u32,
    ) -> Result<Vec<ReceivedMessage>, PortError> {
        let call = async {
            let out = self.inner.receive(channel, max, visibility_secs).await;
            if let (Ok(got), Some(heard)) = (&out, &self.heard) {
                heard(got);
            }
            out
        };
        let got = self
            .dice
            .around(crate::ports::queue::OP_RECEIVE, call)
            .await?;
        let got = self.lose_standbys(channel, got).await;
        // At least once: sometimes a message also goes out again, as a second copy that
        // another worker may take while this one works on the first.
        for m in &got {
            if self.dice.strikes(|r| r.duplicate) {
                let copy = OutgoingMessage {
                    entry_id: "dup".into(),
                    body: m.body.clone(),
                    delay_secs: u32::try_from(self.dice.range(0, 30)).unwrap_or(0),
                };
                let _ = self.inner.send_batch(channel, &[copy]).await;
            }
        }
        Ok(got)
    }
    async fn depth(&self, channel: Channel) -> Result<QueueDepth, PortError> {
        self.dice
            .around(crate::ports::queue::OP_DEPTH, self.inner.depth(channel))
            .await
    }
}

impl<T: DeliveryQueue> Chaotic<T> {
    /// [`super::Plant::LoseFallbackMessages`]: a fallback's message is answered sent and
    /// dropped, and its key remembered.
    fn lose_fallbacks(&self, messages: &[OutgoingMessage]) -> Vec<OutgoingMessage> {
        if self.plant != Some(super::Plant::LoseFallbackMessages) {
            return messages.to_vec();
        }
        let mut kept = Vec::new();
        for m in messages {
            match crate::domain::DeliveryMessage::decode(&m.body) {
                Ok(msg) if msg.fallback_from.is_some() => {
                    crate::ports::faults::lock(&self.losing).insert(msg.delivery_key);
                }
                _ => kept.push(m.clone()),
            }
        }
        kept
    }

    /// ... and any message of a remembered key that comes back is deleted unseen.
    async fn lose_standbys(
        &self,
        channel: Channel,
        got: Vec<ReceivedMessage>,
    ) -> Vec<ReceivedMessage> {
        if self.plant != Some(super::Plant::LoseFallbackMessages) {
            return got;
        }
        let mut kept = Vec::new();
        for m in got {
            let key = crate::domain::DeliveryMessage::decode(&m.body).map(|m| m.delivery_key);
            let lost = key.is_ok_and(|k| crate::ports::faults::lock(&self.losing).contains(&k));
            if lost {
                let _ = self.inner.delete(channel, &m.receipt_handle).await;
            } else {
                kept.push(m);
            }
        }
        kept
    }
}

impl<T: DeadLetters> DeadLetters for Chaotic<T> {
    async fn dead_letter(
        &self,
        channel: Channel,
        body: &str,
        letter: &DeadLetter,
    ) -> Result<(), PortError> {
        if self.plant == Some(super::Plant::DropDeadLetters) {
            return Ok(());
        }
        if self.plant == Some(super::Plant::DoubleDeadLetters) {
            self.inner.dead_letter(channel, body, letter).await?;
        }
        if self.plant == Some(super::Plant::StripDeadLetterReason) {
            let bare = DeadLetter::from_attributes(&Default::default());
            return self.inner.dead_letter(channel, body, &bare).await;
        }
        let call = self.inner.dead_letter(channel, body, letter);
        self.dice
            .around(crate::ports::queue::OP_DEAD_LETTER, call)
            .await
    }
    async fn receive_dead(
        &self,
        channel: Channel,
        max: u32,
        visibility_secs: u32,
    ) -> Result<Vec<DeadLetterMessage>, PortError> {
        let call = self.inner.receive_dead(channel, max, visibility_secs);
        self.dice
            .around(crate::ports::queue::OP_DEAD_RECEIVE, call)
            .await
    }
    async fn delete_dead(&self, channel: Channel, handle: &str) -> Result<(), PortError> {
        let call = self.inner.delete_dead(channel, handle);
        self.dice
            .around(crate::ports::queue::OP_DEAD_DELETE, call)
            .await
    }
    async fn release_dead(&self, channel: Channel, handle: &str) -> Result<(), PortError> {
        let call = self.inner.release_dead(channel, handle);
        self.dice
            .around(crate::ports::queue::OP_DEAD_RELEASE, call)
            .await
    }
}
