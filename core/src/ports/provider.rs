//! The `Provider` port: send one delivery with its idempotency key, get a classified
//! [`Outcome`] back. Real providers (SES, SNS, HTTP) classify their own errors; the harness's
//! providers answer from a script (the tests'), a failure profile (the simulation's) or dice
//! (the chaos worlds').

use std::future::Future;

use super::gate::GatePartition;
use crate::domain::{Channel, Content, DeliveryKey, Recipient};
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

    /// The gate partition this channel's sends are throttled under (one per channel and
    /// provider: the recipient never picks it, so the gate is known before the reminder is
    /// read).
    fn partition(&self, channel: Channel) -> GatePartition;

    fn send(&self, request: &SendRequest) -> impl Future<Output = Outcome> + Send;
}

impl<T: Provider> Provider for std::sync::Arc<T> {
    fn honours_idempotency_key(&self) -> bool {
        (**self).honours_idempotency_key()
    }
    fn partition(&self, channel: Channel) -> GatePartition {
        (**self).partition(channel)
    }
    fn send(&self, request: &SendRequest) -> impl Future<Output = Outcome> + Send {
        (**self).send(request)
    }
}
