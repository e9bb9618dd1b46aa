//! [`Observed`]: the model of the world's ledger adapter, a hook around the memory ledger: the
//! dice around each call and the SDK sending a write again, the table's TTL, the plants of a
//! ledger adapter, and the journal told of every write that lands (what the checker judges
//! against).

use std::sync::Arc;

use super::journal::Journal;
use super::Plant;
use crate::around::{cast, Call, Hook, Next, Value};
use reminders_core::clock::Clock;
use reminders_core::domain::{DeadReason, DeliveryKey};
use reminders_core::ledger::{DeliveryRecord, Status};
use reminders_core::ports::ledger::{OP_DELETE, OP_GET, OP_PUT};
use reminders_core::ports::{Cas, Expected, Ledger, MemoryLedger, PortError};

/// The ledger adapter's model, around the in-memory ledger, telling the journal about every
/// write that lands. With the [`Plant::UnfencedLedger`] fault, writes ignore their condition
/// (a broken adapter). Its writes are made on the memory ledger itself (`ledger`, the one the
/// [`crate::around::Around`] wraps), under the condition it judges: it is the innermost hook of
/// the world's ledger.
pub struct Observed<C> {
    pub ledger: Arc<MemoryLedger>,
    pub dice: Arc<super::dice::Dice>,
    pub journal: Arc<Journal>,
    /// The ledger's stream, which the world's events function reads.
    pub tap: Arc<super::events::Tap>,
    pub clock: C,
    pub plant: Option<Plant>,
    /// How long after its TTL an item is deleted.
    pub ttl_lag_secs: i64,
    /// Told of each death that falls back but names no channel.
    pub died: Option<super::prompt::Prompter>,
    /// Told of each first claim of a chain's head.
    pub claimed: Option<super::prompt::Prompter>,
    /// Told of each first death out of budget that sent nothing.
    pub spent: Option<super::prompt::Prompter>,
    /// A newer version writing beside this one: it may add its attributes after a write lands.
    pub newer: Option<Arc<super::newer::Newer>>,
}

tokio::task_local! {
    /// The channel whose consumer is reading ([`Plant::ReorderSendsBoth`]).
    static READER: reminders_core::domain::Channel;
}

/// Whether the caller runs as a channel's consumer ([`reading_as`]).
pub(super) fn in_a_consumer() -> bool {
    READER.try_with(|_| ()).is_ok()
}

/// Run `work` as `channel`'s consumer (whose reads of another channel's items
/// [`Plant::ReorderSendsBoth`] hides).
pub(super) async fn reading_as<F: std::future::Future>(
    channel: reminders_core::domain::Channel,
    work: F,
) -> F::Output {
    READER.scope(channel, work).await
}

impl<C: Clock> Observed<C> {
    /// The item as the system can read it: DynamoDB's TTL deletes an item some time after
    /// its `expires_at` (the world's lag), and then it is gone for every reader. (The memory
    /// ledger keeps it, for the checker.)
    fn alive(&self, r: Option<DeliveryRecord>) -> Option<DeliveryRecord> {
        let now = self.clock.now().as_millis().div_euclid(1000);
        r.filter(|r| r.expires_at().saturating_add(self.ttl_lag_secs) >= now)
    }
}

impl<C: Clock> Observed<C> {
    /// [`Plant::KeepOldHorizon`]: a horizon move is acknowledged and dropped unless the item
    /// has settled (delivered, expired, cancelled), as before an edit moved the horizon of
    /// unsettled items too.
    fn keeps_old_horizon(&self, before: Option<&DeliveryRecord>, record: &DeliveryRecord) -> bool {
        if self.plant != Some(Plant::KeepOldHorizon) {
            return false;
        }
        let settled = before.is_some_and(|b| {
            matches!(
                b.status(),
                Status::Delivered | Status::Expired | Status::Cancelled
            )
        });
        let latest = record.history().into_iter().max_by_key(|(n, _)| *n);
        let moves = latest.is_some_and(|(_, h)| {
            h.detail.as_deref() == Some(reminders_core::ledger::HORIZON_MOVED)
        });
        moves && before.is_some() && !settled
    }
}

impl<C: Clock> Observed<C> {
    /// A first death that falls back, may not have reached the person and names no channel
    /// (the order's next is not listed): the application is prompted, and may add it.
    async fn died_alone(&self, before: Option<&DeliveryRecord>, record: &DeliveryRecord) {
        let first = before.is_none_or(|b| b.status() != Status::Dead);
        let alone = record.status() == Status::Dead
            && record.dead_reason().is_some_and(DeadReason::falls_back)
            && record.fallback_to().is_none()
            && !record.may_have_reached();
        if let (true, true, Some(origin)) = (first, alone, record.origin()) {
            let what = super::prompt::Prompt::DiedAlone(origin.clone());
            super::prompt::prompt(self.died.as_ref(), what).await;
        }
    }
}

/// A write that hands a death on to a channel it did not name ([`Plant::LostHandOn`]).
fn hands_on(before: Option<&DeliveryRecord>, record: &DeliveryRecord) -> bool {
    before.is_some_and(|b| {
        b.status() == Status::Dead
            && record.status() == Status::Dead
            && b.fallback_to().is_none()
            && record.fallback_to().is_some()
    })
}

impl<C: Clock> Observed<C> {
    /// A fallback's first claim (the channel that took the reminder over is about to send):
    /// the application and the operator are prompted (the take-over after a death that named no
    /// channel).
    async fn took_over(&self, before: Option<&DeliveryRecord>, record: &DeliveryRecord) {
        let first = before.is_none_or(|b| b.origin().is_none());
        let taking = record
            .origin()
            .filter(|o| o.fallback_from.is_some() && record.status() == Status::Sending);
        if let (true, Some(origin)) = (first, taking) {
            let what = super::prompt::Prompt::TookOver(origin.clone());
            super::prompt::prompt(self.died.as_ref(), what).await;
        }
    }
}

impl<C: Clock> Observed<C> {
    /// A chain's head claimed for the first time: the subscriber is prompted, and moves it to the
    /// end of the order before it sends and before the next channel looks.
    async fn head_claimed(&self, before: Option<&DeliveryRecord>, record: &DeliveryRecord) {
        let head = |r: &DeliveryRecord| r.origin().is_some_and(|o| o.chain_head);
        let claimed = record.status() == Status::Sending && head(record);
        if let (true, false, Some(origin)) = (claimed, before.is_some_and(head), record.origin()) {
            let what = super::prompt::Prompt::HeadClaimed(origin.clone());
            super::prompt::prompt(self.claimed.as_ref(), what).await;
        }
    }
}

impl<C: Clock> Observed<C> {
    /// A first death with the budget spent, known to have sent nothing: the subscriber and the
    /// operator are prompted.
    async fn spent(&self, before: Option<&DeliveryRecord>, record: &DeliveryRecord) {
        let first = before.is_none_or(|b| b.status() != Status::Dead);
        let spent = record.status() == Status::Dead
            && record.dead_reason() == Some(DeadReason::AttemptsExhausted)
            && !record.may_have_reached();
        if let (true, true, Some(origin)) = (first, spent, record.origin()) {
            let what = super::prompt::Prompt::DiedSpent(origin.clone());
            super::prompt::prompt(self.spent.as_ref(), what).await;
        }
    }
}

impl<C: Clock> Hook for Observed<C> {
    async fn around<R: Value>(&self, call: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        let applied = |c: &Cas| *c == Cas::Applied;
        match call {
            Call::LedgerGet { .. } => {
                let read = async { self.get(next().await.map(cast)?).map(cast) };
                self.dice.around(OP_GET, read).await
            }
            Call::PutIf { record, expected } => {
                let write = || self.put_if(record, (*expected).clone());
                self.dice.write(OP_PUT, write, applied).await.map(cast)
            }
            Call::DeleteIf { key, expected } => {
                let write = || self.delete_if(key, (*expected).clone());
                self.dice.write(OP_DELETE, write, applied).await.map(cast)
            }
            _ => self.dice.around(call.name(), next()).await,
        }
    }
}

impl<C: Clock> Observed<C> {
    /// An item as a reader sees it: gone past the TTL, and as the plants read it.
    fn get(&self, stored: Option<DeliveryRecord>) -> Result<Option<DeliveryRecord>, PortError> {
        let got = self.alive(stored);
        Ok(match self.plant {
            Some(Plant::ForgetAttempts) => got.map(forget_attempts),
            Some(Plant::ForgetMaybeSent) => got.map(forget_maybe_sent),
            Some(Plant::ReorderSendsBoth) => got.and_then(blind_to_siblings),
            // A lost hand-on, with the recorded chain that would now refuse the redriven
            // head forgotten too, so that the hand-on alone is what is left to refuse it.
            Some(Plant::ForgetRecordedChain | Plant::LostHandOn) => got.map(forget_chain),
            // Outside the consumers (an edit's look at the channels it adds), a cancelled item
            // reads as none.
            Some(Plant::ForgetEditedAway) if !in_a_consumer() => {
                got.filter(|r| r.status() != Status::Cancelled)
            }
            _ => got,
        })
    }

    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        // The memory ledger answers without yielding: nothing runs between this read and the
        // write. The condition is judged here, against the item as it lives (past its TTL it
        // is gone), and the write then replaces whatever the memory ledger still keeps.
        let stored = self.ledger.get(record.key()).await?;
        let before = self.alive(stored.clone());
        let expected = match self.plant {
            Some(Plant::UnfencedLedger) => Expected::of(before.as_ref()),
            _ => expected,
        };
        let holds = expected.holds_for(before.as_ref());
        let dropped = holds
            && match self.plant {
                Some(Plant::LostCancel) => record.status() == Status::Cancelled,
                Some(Plant::LostHandOn) => hands_on(before.as_ref(), record),
                _ => false,
            };
        if dropped || (holds && self.keeps_old_horizon(before.as_ref(), record)) {
            return Ok(Cas::Applied);
        }
        if !holds {
            return Ok(Cas::Conflict(before.map(|cur| {
                let cur = match self.plant {
                    Some(Plant::ForgetAttempts) => forget_attempts(cur),
                    Some(Plant::ForgetMaybeSent) => forget_maybe_sent(cur),
                    _ => cur,
                };
                Box::new(cur)
            })));
        }
        if let (None, Some(newer)) = (&before, &self.newer) {
            newer.gone(record.key());
        }
        // Boxed: a record held across the write's await would double this future's size.
        let planted = super::newer::as_written(self.plant, record).map(Box::new);
        let record = planted.as_deref().unwrap_or(record);
        let answer = self
            .ledger
            .put_if(record, Expected::of(stored.as_ref()))
            .await?;
        if answer == Cas::Applied {
            if let Some(newer) = &self.newer {
                Box::pin(newer.after(&self.ledger, record)).await;
            }
            self.journal
                .landed(before.as_ref(), record, self.clock.now());
            self.tap.landed(before.as_ref(), record);
            self.died_alone(before.as_ref(), record).await;
            self.took_over(before.as_ref(), record).await;
            self.head_claimed(before.as_ref(), record).await;
            self.spent(before.as_ref(), record).await;
        }
        Ok(answer)
    }

    /// A claim undone (the one-read path's give-back): judged as a write is; the journal
    /// forgets the claim, as the ledger does.
    async fn delete_if(&self, key: &DeliveryKey, expected: Expected) -> Result<Cas, PortError> {
        let stored = self.ledger.get(key).await?;
        let before = self.alive(stored.clone());
        if before.is_none() || !expected.holds_for(before.as_ref()) {
            return Ok(Cas::Conflict(before.map(Box::new)));
        }
        let answer = self
            .ledger
            .delete_if(key, Expected::of(stored.as_ref()))
            .await?;
        if answer == Cas::Applied {
            self.journal.removed(key);
            if let Some(newer) = &self.newer {
                newer.gone(key);
            }
        }
        Ok(answer)
    }
}

/// [`Plant::ReorderSendsBoth`]: an item read without `chain_head`, and, by another channel's
/// consumer, none at all unless it died.
fn blind_to_siblings(r: DeliveryRecord) -> Option<DeliveryRecord> {
    let reader = READER.try_with(|c| *c).ok();
    let theirs = r.origin().map(|o| o.channel);
    if reader.is_some() && theirs != reader && r.status() != Status::Dead {
        return None;
    }
    let Ok(mut v) = serde_json::to_value(&r) else {
        return Some(r);
    };
    if let Some(o) = v["origin"].as_object_mut() {
        o.remove("chain_head");
    }
    Some(serde_json::from_value(v).unwrap_or(r))
}

/// [`Plant::ForgetRecordedChain`]: an item read without the chain its first claim recorded.
fn forget_chain(r: DeliveryRecord) -> DeliveryRecord {
    let Ok(mut v) = serde_json::to_value(&r) else {
        return r;
    };
    if let Some(o) = v["origin"].as_object_mut() {
        o.remove("chain");
    }
    serde_json::from_value(v).unwrap_or(r)
}

/// [`Plant::ForgetAttempts`]: a waiting delivery read with no attempt spent.
fn forget_attempts(r: DeliveryRecord) -> DeliveryRecord {
    if !matches!(r.status(), Status::Deferred | Status::Ready) {
        return r;
    }
    let Ok(mut v) = serde_json::to_value(&r) else {
        return r;
    };
    v["attempt_count"] = 0.into();
    serde_json::from_value(v).unwrap_or(r)
}

/// [`Plant::ForgetMaybeSent`]: an item read as if no attempt could have reached the person
/// (no `maybe_sent`, and no history detail that tells it).
fn forget_maybe_sent(r: DeliveryRecord) -> DeliveryRecord {
    let Ok(mut v) = serde_json::to_value(&r) else {
        return r;
    };
    if let Some(o) = v.as_object_mut() {
        o.remove("maybe_sent");
    }
    if let Some(h) = v["history"].as_object_mut() {
        for e in h.values_mut() {
            let tells = e["detail"]
                .as_str()
                .is_some_and(|d| d == "ambiguous" || d.starts_with("lease expired"));
            if tells {
                e["detail"] = serde_json::Value::Null;
            }
        }
    }
    serde_json::from_value(v).unwrap_or(r)
}
