//! What the checker watches, per delivery key, as it happens: every provider call (when it
//! started, what it answered, whether the provider accepted it), every ledger write that
//! landed, and the violations seen at the moment they happen (a send after the ledger recorded
//! the delivery or its cancel, after `fresh_until`, before a Retry-After).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::clock::{Clock, Timestamp};
use crate::delivery::state::{DeliveryRecord, Status};
use crate::domain::{DeadReason, DeliveryKey};
use crate::policy::OutcomeClass;
use crate::ports::faults::lock;
use crate::ports::{Cas, Expected, Ledger, MemoryLedger, PortError};

use super::Plant;

#[derive(Debug, Default, Clone)]
pub struct KeyFacts {
    /// Provider calls that spent an attempt (not throttled).
    pub attempts: u32,
    /// Times the provider took the message in (what the recipient would see, before any
    /// deduplication on the idempotency key).
    pub acceptances: u32,
    pub delivered_at: Option<Timestamp>,
    pub cancelled_at: Option<Timestamp>,
    /// The earliest the provider asked to be called again for this key, once the system
    /// learned it (a throttled deferral landed on the ledger after the 429). A 429 whose
    /// worker stopped before recording anything is one the system never heard.
    pub retry_after: Option<Timestamp>,
    /// The Retry-After of the latest 429, until a throttled deferral records it.
    pub heard_retry_after: Option<Timestamp>,
    /// When it died, each time (as the ledger states it: what a DLQ copy must state).
    pub deaths: Vec<Timestamp>,
    /// `dead → ready` transitions (each grants a fresh budget).
    pub redrives: u32,
    /// Redriven out of `dead/ambiguous` (an operator accepted a possible second send).
    pub redriven_ambiguous: bool,
    pub stale_sends: u32,
    pub early_sends: u32,
    pub sends_after_cancel: u32,
    pub sends_after_delivered: u32,
}

#[derive(Default)]
pub struct Journal {
    keys: Mutex<BTreeMap<DeliveryKey, KeyFacts>>,
}

impl Journal {
    pub fn facts(&self) -> BTreeMap<DeliveryKey, KeyFacts> {
        lock(&self.keys).clone()
    }

    fn with<R>(&self, key: &DeliveryKey, f: impl FnOnce(&mut KeyFacts) -> R) -> R {
        f(lock(&self.keys).entry(key.clone()).or_default())
    }

    /// A provider call starts now, for a reminder fresh until `fresh_until`.
    pub fn send_started(&self, key: &DeliveryKey, now: Timestamp, fresh_until: Timestamp) {
        self.with(key, |k| {
            k.stale_sends += u32::from(now > fresh_until);
            k.early_sends += u32::from(k.retry_after.is_some_and(|at| now < at));
            k.sends_after_cancel += u32::from(k.cancelled_at.is_some());
            k.sends_after_delivered += u32::from(k.delivered_at.is_some());
        });
    }

    pub fn attempt(&self, key: &DeliveryKey) {
        self.with(key, |k| k.attempts += 1);
    }

    pub fn accepted(&self, key: &DeliveryKey) {
        self.with(key, |k| k.acceptances += 1);
    }

    pub fn throttled(&self, key: &DeliveryKey, until: Timestamp) {
        self.with(key, |k| k.heard_retry_after = Some(until));
    }

    fn landed(&self, before: Option<&DeliveryRecord>, after: &DeliveryRecord, now: Timestamp) {
        let from = before.map_or(Status::Scheduled, DeliveryRecord::status);
        let to = after.status();
        self.with(after.key(), |k| {
            if to == Status::Delivered && k.delivered_at.is_none() {
                k.delivered_at = Some(now);
            }
            if to == Status::Cancelled && k.cancelled_at.is_none() {
                k.cancelled_at = Some(now);
            }
            let throttled = after.last_outcome_class() == Some(OutcomeClass::Throttled);
            if to == Status::Deferred && from == Status::Sending && throttled {
                if let Some(until) = k.heard_retry_after.take() {
                    k.retry_after = Some(k.retry_after.map_or(until, |t| t.max(until)));
                }
            }
            if to == Status::Dead && from != Status::Dead {
                k.deaths.push(after.dead_at().unwrap_or(now));
            }
            if from == Status::Dead && to == Status::Ready {
                k.redrives += 1;
                let reason = before.and_then(DeliveryRecord::dead_reason);
                k.redriven_ambiguous |= reason == Some(DeadReason::Ambiguous);
            }
        });
    }
}

/// The in-memory ledger, telling the journal about every write that lands. With the
/// [`Plant::UnfencedLedger`] fault, writes ignore their condition (a broken adapter).
pub struct Observed<C> {
    pub inner: Arc<MemoryLedger>,
    pub journal: Arc<Journal>,
    pub clock: C,
    pub plant: Option<Plant>,
}

impl<C: Clock> Ledger for Observed<C> {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        self.inner.get(key).await
    }

    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        // The memory ledger answers without yielding: nothing runs between this read and the
        // write.
        let before = self.inner.get(record.key()).await?;
        let expected = match self.plant {
            Some(Plant::UnfencedLedger) => Expected::of(before.as_ref()),
            _ => expected,
        };
        let answer = self.inner.put_if(record, expected).await?;
        if answer == Cas::Applied {
            self.journal
                .landed(before.as_ref(), record, self.clock.now());
        }
        Ok(answer)
    }
}
