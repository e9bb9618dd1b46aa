//! [`MemoryQueue`]: the queue and DLQ ports in memory, on a [`Clock`]. Delays, visibility
//! timeouts and receive counts behave as SQS's do (to the second), receipt handles change per
//! receive, and batches follow SQS's rules.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::clock::{Clock, Timestamp};
use crate::deadletter::DeadLetter;
use crate::domain::Channel;
use crate::ports::faults::{lock, FaultPoint, Faults};
use crate::ports::PortError;

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

    /// The bodies of every message in the channel's queue, visible or not, without receiving
    /// them (for tests and the simulation's accounting).
    pub fn peek_all(&self, channel: Channel) -> Vec<String> {
        lock(&self.queues)
            .get(&channel)
            .map(|q| q.iter().map(|m| m.body.clone()).collect())
            .unwrap_or_default()
    }

    /// Every message of the channel's queue with its dead letter (reason and evidence), visible
    /// or not, without receiving them.
    pub fn peek_letters(&self, channel: Channel) -> Vec<(String, DeadLetter)> {
        lock(&self.queues)
            .get(&channel)
            .map(|q| {
                q.iter()
                    .map(|m| (m.body.clone(), DeadLetter::from_attributes(&m.attributes)))
                    .collect()
            })
            .unwrap_or_default()
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
            let attributes = letter.to_attributes();
            if message_size(body, &attributes) > MAX_MESSAGE_BYTES {
                // As SQS refuses it.
                return Err(PortError::Refused {
                    op: OP_DEAD_LETTER,
                    message: "message too long".into(),
                });
            }
            self.push(channel, body, attributes, 0);
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
