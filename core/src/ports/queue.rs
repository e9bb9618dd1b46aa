//! The `DeliveryQueue` and `DeadLetters` ports: one SQS queue and one DLQ per channel.
//!
//! [`MemoryQueue`] serves both in memory, on a [`Clock`](crate::clock::Clock): delays, visibility timeouts and
//! receive counts behave as SQS's do (to the second), and receipt handles change per receive.

use std::collections::BTreeMap;
use std::future::Future;

use super::PortError;
use crate::deadletter::DeadLetter;
use crate::domain::Channel;

mod memory;
pub use memory::{MemoryQueue, StaleHandles};

pub const OP_SEND: &str = "queue.send_batch";
pub const OP_RECEIVE: &str = "queue.receive";
pub const OP_VISIBILITY: &str = "queue.change_visibility";
pub const OP_DELETE: &str = "queue.delete";
pub const OP_DEPTH: &str = "queue.depth";
pub const OP_DEAD_LETTER: &str = "dlq.send";
pub const OP_DEAD_RECEIVE: &str = "dlq.receive";
pub const OP_DEAD_DELETE: &str = "dlq.delete";
pub const OP_DEAD_RELEASE: &str = "dlq.release";
/// One entry of a batch (a fault here fails that entry only: a partial batch failure).
pub const OP_SEND_ENTRY: &str = "queue.send_entry";

/// SQS batch limit.
pub const MAX_BATCH: usize = 10;
/// SQS's largest message: body and message attributes (names, types and values) together.
pub const MAX_MESSAGE_BYTES: usize = 262_144;

/// A message's size as SQS counts it against [`MAX_MESSAGE_BYTES`] (string attributes).
pub fn message_size(body: &str, attributes: &BTreeMap<String, String>) -> usize {
    body.len()
        + attributes
            .iter()
            .map(|(k, v)| k.len() + "String".len() + v.len())
            .sum::<usize>()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMessage {
    /// Unique within the batch; failures name it.
    pub entry_id: String,
    pub body: String,
    pub delay_secs: u32,
}

/// One entry of a partial batch failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendFailure {
    pub entry_id: String,
    /// SQS's `SenderFault`: retrying the same entry will fail again.
    pub sender_fault: bool,
    pub code: String,
}

/// A received message, with its message attributes (string values) and system attributes
/// (`ApproximateReceiveCount`, `SentTimestamp`, …) as SQS names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    pub attributes: BTreeMap<String, String>,
    pub system: BTreeMap<String, String>,
}

impl ReceivedMessage {
    pub fn receive_count(&self) -> u32 {
        self.system
            .get("ApproximateReceiveCount")
            .and_then(|c| c.parse().ok())
            .unwrap_or(1)
    }
}

/// Approximate message counts of a queue (SQS's `ApproximateNumberOf*` attributes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    pub visible: u64,
    pub in_flight: u64,
    pub delayed: u64,
}

impl QueueDepth {
    pub fn total(&self) -> u64 {
        self.visible + self.in_flight + self.delayed
    }
}

/// A DLQ message with its dead-letter attributes decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterMessage {
    pub message: ReceivedMessage,
    pub letter: DeadLetter,
}

pub trait DeliveryQueue: Send + Sync {
    /// Up to [`MAX_BATCH`] messages; returns the entries that failed.
    fn send_batch(
        &self,
        channel: Channel,
        messages: &[OutgoingMessage],
    ) -> impl Future<Output = Result<Vec<SendFailure>, PortError>> + Send;

    fn change_visibility(
        &self,
        channel: Channel,
        receipt_handle: &str,
        secs: u32,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    fn delete(
        &self,
        channel: Channel,
        receipt_handle: &str,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    fn receive(
        &self,
        channel: Channel,
        max: u32,
        visibility_secs: u32,
    ) -> impl Future<Output = Result<Vec<ReceivedMessage>, PortError>> + Send;

    /// How many messages the channel's queue holds, approximately.
    fn depth(&self, channel: Channel)
        -> impl Future<Output = Result<QueueDepth, PortError>> + Send;
}

impl<T: DeliveryQueue> DeliveryQueue for std::sync::Arc<T> {
    fn send_batch(
        &self,
        channel: Channel,
        messages: &[OutgoingMessage],
    ) -> impl Future<Output = Result<Vec<SendFailure>, PortError>> + Send {
        (**self).send_batch(channel, messages)
    }
    fn change_visibility(
        &self,
        channel: Channel,
        receipt_handle: &str,
        secs: u32,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).change_visibility(channel, receipt_handle, secs)
    }
    fn delete(
        &self,
        channel: Channel,
        receipt_handle: &str,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).delete(channel, receipt_handle)
    }
    fn receive(
        &self,
        channel: Channel,
        max: u32,
        visibility_secs: u32,
    ) -> impl Future<Output = Result<Vec<ReceivedMessage>, PortError>> + Send {
        (**self).receive(channel, max, visibility_secs)
    }
    fn depth(
        &self,
        channel: Channel,
    ) -> impl Future<Output = Result<QueueDepth, PortError>> + Send {
        (**self).depth(channel)
    }
}

impl<T: DeadLetters> DeadLetters for std::sync::Arc<T> {
    fn dead_letter(
        &self,
        channel: Channel,
        body: &str,
        letter: &DeadLetter,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).dead_letter(channel, body, letter)
    }
    fn receive_dead(
        &self,
        channel: Channel,
        max: u32,
        visibility_secs: u32,
    ) -> impl Future<Output = Result<Vec<DeadLetterMessage>, PortError>> + Send {
        (**self).receive_dead(channel, max, visibility_secs)
    }
    fn delete_dead(
        &self,
        channel: Channel,
        receipt_handle: &str,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).delete_dead(channel, receipt_handle)
    }
    fn release_dead(
        &self,
        channel: Channel,
        receipt_handle: &str,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).release_dead(channel, receipt_handle)
    }
}

pub trait DeadLetters: Send + Sync {
    /// Send a copy of `body` to the channel's DLQ with the letter's attributes only.
    fn dead_letter(
        &self,
        channel: Channel,
        body: &str,
        letter: &DeadLetter,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    fn receive_dead(
        &self,
        channel: Channel,
        max: u32,
        visibility_secs: u32,
    ) -> impl Future<Output = Result<Vec<DeadLetterMessage>, PortError>> + Send;

    fn delete_dead(
        &self,
        channel: Channel,
        receipt_handle: &str,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Make a held message visible again at once.
    fn release_dead(
        &self,
        channel: Channel,
        receipt_handle: &str,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}
