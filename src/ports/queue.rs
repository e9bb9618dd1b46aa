//! The `DeliveryQueue` and `DeadLetters` ports: one SQS queue and one DLQ per channel.
//!
//! [`MemoryQueue`] serves both in memory, on a [`Clock`]: delays, visibility timeouts and
//! receive counts behave as SQS's do (to the second), and receipt handles change per receive.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::faults::{lock, FaultPoint, Faults};
use super::PortError;
use crate::clock::{Clock, Timestamp};
use crate::deadletter::DeadLetter;
use crate::domain::Channel;

pub const OP_SEND: &str = "queue.send_batch";
pub const OP_RECEIVE: &str = "queue.receive";
pub const OP_VISIBILITY: &str = "queue.change_visibility";
pub const OP_DELETE: &str = "queue.delete";
pub const OP_DEPTH: &str = "queue.depth";
pub const OP_DEAD_LETTER: &str = "dlq.send";
/// One entry of a batch (a fault here fails that entry only: a partial batch failure).
pub const OP_SEND_ENTRY: &str = "queue.send_entry";

/// SQS batch limit.
pub const MAX_BATCH: usize = 10;

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

#[derive(Debug, Clone)]
struct Stored {
    id: String,
    body: String,
    attributes: BTreeMap<String, String>,
    sent_at: Timestamp,
    /// When it first became receivable (after its DelaySeconds).
    ready_at: Timestamp,
    visible_at: Timestamp,
    receive_count: u32,
    receipt: Option<String>,
}

/// In-memory queues, one per channel. Use one instance as the delivery queues and another as
/// the DLQs.
#[derive(Debug)]
pub struct MemoryQueue<C> {
    clock: C,
    queues: Mutex<BTreeMap<Channel, Vec<Stored>>>,
    next_id: Mutex<u64>,
    faults: Faults,
    /// The queue's redrive policy: past this many receives, a message moves to the DLQ.
    redrive: Option<(u32, Arc<MemoryQueue<C>>)>,
}

impl<C: Clock> MemoryQueue<C> {
    pub fn new(clock: C) -> Self {
        Self::with_faults(clock, Faults::default())
    }

    pub fn with_faults(clock: C, faults: Faults) -> Self {
        Self {
            clock,
            queues: Mutex::default(),
            next_id: Mutex::new(0),
            faults,
            redrive: None,
        }
    }

    /// Give the queues a redrive policy (`maxReceiveCount`) into `dlq`, as SQS does.
    pub fn with_redrive(mut self, max_receive_count: u32, dlq: Arc<MemoryQueue<C>>) -> Self {
        self.redrive = Some((max_receive_count.max(1), dlq));
        self
    }

    /// Messages in the channel's queue, visible or not.
    pub fn len(&self, channel: Channel) -> usize {
        lock(&self.queues).get(&channel).map_or(0, Vec::len)
    }

    /// Whether the channel's queue holds no message at all.
    pub fn is_empty(&self, channel: Channel) -> bool {
        self.len(channel) == 0
    }

    fn counts(&self, channel: Channel) -> QueueDepth {
        let now = self.clock.now();
        let queues = lock(&self.queues);
        let mut d = QueueDepth::default();
        for m in queues.get(&channel).into_iter().flatten() {
            match (m.visible_at <= now, m.receive_count) {
                (true, _) => d.visible += 1,
                (false, 0) => d.delayed += 1,
                (false, _) => d.in_flight += 1,
            }
        }
        d
    }

    /// When the oldest receivable message of the channel became receivable (a message still
    /// inside its DelaySeconds is not waiting yet).
    pub fn oldest_ready_at(&self, channel: Channel) -> Option<Timestamp> {
        let now = self.clock.now();
        lock(&self.queues)
            .get(&channel)
            .and_then(|q| q.iter().map(|m| m.ready_at).filter(|r| *r <= now).min())
    }

    fn push(&self, channel: Channel, body: &str, attrs: BTreeMap<String, String>, delay: u32) {
        let now = self.clock.now();
        let id = {
            let mut n = lock(&self.next_id);
            *n += 1;
            format!("m-{:08}", *n)
        };
        lock(&self.queues).entry(channel).or_default().push(Stored {
            id,
            body: body.to_owned(),
            attributes: attrs,
            sent_at: now,
            ready_at: now.plus(Duration::from_secs(u64::from(delay))),
            visible_at: now.plus(Duration::from_secs(u64::from(delay))),
            receive_count: 0,
            receipt: None,
        });
    }

    fn take(&self, channel: Channel, max: u32, visibility: u32) -> Vec<ReceivedMessage> {
        let now = self.clock.now();
        let mut queues = lock(&self.queues);
        let Some(q) = queues.get_mut(&channel) else {
            return Vec::new();
        };
        if let Some((max_receives, dlq)) = &self.redrive {
            let (dead, alive): (Vec<Stored>, Vec<Stored>) = std::mem::take(q)
                .into_iter()
                .partition(|m| m.visible_at <= now && m.receive_count >= *max_receives);
            *q = alive;
            for m in dead {
                // Moved by the redrive policy: body and attributes as they were.
                dlq.push(channel, &m.body, m.attributes, 0);
            }
        }
        q.iter_mut()
            .filter(|m| m.visible_at <= now)
            .take(max as usize)
            .map(|m| {
                m.receive_count += 1;
                m.visible_at = now.plus(Duration::from_secs(u64::from(visibility)));
                let receipt = format!("{}#{}", m.id, m.receive_count);
                m.receipt = Some(receipt.clone());
                let mut system = BTreeMap::new();
                system.insert(
                    "ApproximateReceiveCount".to_owned(),
                    m.receive_count.to_string(),
                );
                system.insert(
                    "SentTimestamp".to_owned(),
                    m.sent_at.as_millis().to_string(),
                );
                ReceivedMessage {
                    message_id: m.id.clone(),
                    receipt_handle: receipt,
                    body: m.body.clone(),
                    attributes: m.attributes.clone(),
                    system,
                }
            })
            .collect()
    }

    fn set_visibility(&self, channel: Channel, receipt: &str, secs: u32) -> Result<(), PortError> {
        let now = self.clock.now();
        let mut queues = lock(&self.queues);
        let found = queues
            .get_mut(&channel)
            .and_then(|q| q.iter_mut().find(|m| m.receipt.as_deref() == Some(receipt)));
        match found {
            Some(m) => {
                m.visible_at = now.plus(Duration::from_secs(u64::from(secs)));
                Ok(())
            }
            None => Err(PortError::Refused {
                op: OP_VISIBILITY,
                message: "receipt handle is not current".into(),
            }),
        }
    }

    fn remove(&self, channel: Channel, receipt: &str) {
        if let Some(q) = lock(&self.queues).get_mut(&channel) {
            q.retain(|m| m.receipt.as_deref() != Some(receipt));
        }
    }

    fn guarded<T>(
        &self,
        op: &'static str,
        f: impl FnOnce() -> Result<T, PortError>,
    ) -> Result<T, PortError> {
        self.faults.check(op, FaultPoint::Before)?;
        let out = f()?;
        self.faults.check(op, FaultPoint::After)?;
        Ok(out)
    }
}

/// SQS's batch rules: 1 to 10 entries with distinct ids.
fn check_batch(messages: &[OutgoingMessage]) -> Result<(), PortError> {
    let refused = |message: &str| {
        Err(PortError::Refused {
            op: OP_SEND,
            message: message.into(),
        })
    };
    if messages.is_empty() || messages.len() > MAX_BATCH {
        return refused("a batch holds 1 to 10 entries");
    }
    let ids: std::collections::BTreeSet<&str> =
        messages.iter().map(|m| m.entry_id.as_str()).collect();
    if ids.len() != messages.len() {
        return refused("batch entry ids are not distinct");
    }
    Ok(())
}

impl<C: Clock> DeliveryQueue for MemoryQueue<C> {
    async fn send_batch(
        &self,
        channel: Channel,
        messages: &[OutgoingMessage],
    ) -> Result<Vec<SendFailure>, PortError> {
        self.guarded(OP_SEND, || {
            check_batch(messages)?;
            let mut failed = Vec::new();
            for m in messages {
                if self
                    .faults
                    .check(OP_SEND_ENTRY, FaultPoint::Before)
                    .is_err()
                {
                    failed.push(SendFailure {
                        entry_id: m.entry_id.clone(),
                        sender_fault: false,
                        code: "InternalError".into(),
                    });
                    continue;
                }
                self.push(channel, &m.body, BTreeMap::new(), m.delay_secs.min(900));
            }
            Ok(failed)
        })
    }

    async fn change_visibility(
        &self,
        channel: Channel,
        receipt: &str,
        secs: u32,
    ) -> Result<(), PortError> {
        self.guarded(OP_VISIBILITY, || {
            self.set_visibility(channel, receipt, secs)
        })
    }

    async fn delete(&self, channel: Channel, receipt: &str) -> Result<(), PortError> {
        self.guarded(OP_DELETE, || {
            self.remove(channel, receipt);
            Ok(())
        })
    }

    async fn receive(
        &self,
        channel: Channel,
        max: u32,
        visibility: u32,
    ) -> Result<Vec<ReceivedMessage>, PortError> {
        self.guarded(OP_RECEIVE, || Ok(self.take(channel, max, visibility)))
    }

    async fn depth(&self, channel: Channel) -> Result<QueueDepth, PortError> {
        Ok(self.counts(channel))
    }
}
impl<C: Clock> DeadLetters for MemoryQueue<C> {
    async fn dead_letter(
        &self,
        channel: Channel,
        body: &str,
        letter: &DeadLetter,
    ) -> Result<(), PortError> {
        self.guarded(OP_DEAD_LETTER, || {
            self.push(channel, body, letter.to_attributes(), 0);
            Ok(())
        })
    }

    async fn receive_dead(
        &self,
        channel: Channel,
        max: u32,
        visibility: u32,
    ) -> Result<Vec<DeadLetterMessage>, PortError> {
        self.guarded(OP_RECEIVE, || {
            Ok(self
                .take(channel, max, visibility)
                .into_iter()
                .map(|message| DeadLetterMessage {
                    letter: DeadLetter::from_attributes(&message.attributes),
                    message,
                })
                .collect())
        })
    }

    async fn delete_dead(&self, channel: Channel, receipt: &str) -> Result<(), PortError> {
        self.guarded(OP_DELETE, || {
            self.remove(channel, receipt);
            Ok(())
        })
    }

    async fn release_dead(&self, channel: Channel, receipt: &str) -> Result<(), PortError> {
        self.guarded(OP_VISIBILITY, || self.set_visibility(channel, receipt, 0))
    }
}
