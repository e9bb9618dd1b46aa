//! The `Provider` port: send one delivery with its idempotency key, get a classified
//! [`Outcome`] back. Real providers (SES, SNS, HTTP) classify their own errors; the
//! [`MemoryProvider`] here answers from a script and counts calls per key.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::Mutex;

use super::faults::lock;
use super::gate::GatePartition;
use crate::domain::{Content, DeliveryKey, Recipient};
use crate::policy::Outcome;

/// Everything a provider needs for one send. The key doubles as the idempotency key.
#[derive(Debug, Clone)]
pub struct SendRequest {
    pub delivery_key: DeliveryKey,
    pub recipient: Recipient,
    pub content: Content,
    pub payload_version: u64,
}

pub trait Provider: Send + Sync {
    /// Whether the provider deduplicates on the idempotency key (decides the ambiguous rule).
    fn honours_idempotency_key(&self) -> bool;

    /// The gate partition this request is throttled under.
    fn partition(&self, request: &SendRequest) -> GatePartition;

    fn send(&self, request: &SendRequest) -> impl Future<Output = Outcome> + Send;
}

/// A provider that answers from a script (then `Delivered`), and counts calls per key.
#[derive(Debug, Default)]
pub struct MemoryProvider {
    script: Mutex<VecDeque<Outcome>>,
    calls: Mutex<BTreeMap<DeliveryKey, u32>>,
    idempotent: bool,
}

impl MemoryProvider {
    pub fn new(idempotent: bool) -> Self {
        Self {
            idempotent,
            ..Self::default()
        }
    }

    /// Queue answers for the next calls, in order.
    pub fn script(&self, outcomes: impl IntoIterator<Item = Outcome>) {
        lock(&self.script).extend(outcomes);
    }

    pub fn calls_for(&self, key: &DeliveryKey) -> u32 {
        lock(&self.calls).get(key).copied().unwrap_or(0)
    }

    pub fn total_calls(&self) -> u32 {
        lock(&self.calls).values().sum()
    }
}

impl Provider for MemoryProvider {
    fn honours_idempotency_key(&self) -> bool {
        self.idempotent
    }

    fn partition(&self, request: &SendRequest) -> GatePartition {
        GatePartition::new(request.recipient.channel(), "memory")
    }

    async fn send(&self, request: &SendRequest) -> Outcome {
        *lock(&self.calls)
            .entry(request.delivery_key.clone())
            .or_default() += 1;
        lock(&self.script)
            .pop_front()
            .unwrap_or(Outcome::Delivered {
                receipt: Some(format!("mem-{}", request.delivery_key)),
            })
    }
}
