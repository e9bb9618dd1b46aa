//! [`MemoryQueue`]: the queue and DLQ ports in memory, on a [`Clock`]. Delays, visibility
//! timeouts and receive counts behave as SQS's do (to the second), receipt handles change per
//! receive, and batches follow SQS's rules.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::clock::{Clock, Timestamp};
use crate::deadletter::DeadLetter;
use crate::domain::Channel;
use crate::ports::PortError;
use crate::sync::lock;

/// A message; its id and receipt handles are made from its send sequence and receive count
/// ([`message_id`], [`receipt`]), so the queue keeps no table of handles: a delivered
/// message leaves nothing behind.
#[derive(Debug, Clone)]
struct Stored {
    body: String,
    attributes: BTreeMap<String, String>,
    sent_at: Timestamp,
    /// When it first became receivable (after its DelaySeconds).
    ready_at: Timestamp,
    visible_at: Timestamp,
    receive_count: u32,
    /// Which index holds it.
    place: Place,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Invisible (delayed or in flight) until `visible_at`.
    Waiting,
    /// Visible and receivable.
    Ready,
    /// Visible, but past the redrive policy's receive count: moves to the DLQ on the next
    /// receive, as SQS moves it.
    Spent,
}

/// One channel's queue, indexed as a real queue is: receiving, deleting and changing a
/// message's visibility cost O(log n), never a scan of the backlog. Visible messages are
/// received in the order they were sent (a deterministic choice; SQS promises no order).
#[derive(Debug, Default)]
struct Channelq {
    /// By send sequence.
    messages: BTreeMap<u64, Stored>,
    /// Invisible messages by (visible_at, seq); they move to `ready` once visible.
    waiting: BTreeSet<(Timestamp, u64)>,
    ready: BTreeSet<u64>,
    spent: BTreeSet<u64>,
    /// Every message by (ready_at, seq): the oldest one's age.
    by_age: BTreeSet<(Timestamp, u64)>,
    /// Waiting messages never received (delayed, not in flight).
    delayed: usize,
}

impl Channelq {
    /// Move every message visible at `now` out of `waiting`; one whose receive count reached
    /// `max_receives` is spent.
    fn promote(&mut self, now: Timestamp, max_receives: Option<u32>) {
        while let Some(&(at, seq)) = self.waiting.first() {
            if at > now {
                break;
            }
            self.waiting.pop_first();
            let m = self.messages.get_mut(&seq).expect("indexed message exists");
            if m.receive_count == 0 {
                self.delayed -= 1;
            }
            m.place = match max_receives {
                Some(max) if m.receive_count >= max => Place::Spent,
                _ => Place::Ready,
            };
            match m.place {
                Place::Spent => self.spent.insert(seq),
                _ => self.ready.insert(seq),
            };
        }
    }

    /// Take `seq` out of whichever visibility index holds it.
    fn unplace(&mut self, seq: u64) {
        let m = &self.messages[&seq];
        match m.place {
            Place::Waiting => {
                self.waiting.remove(&(m.visible_at, seq));
                if m.receive_count == 0 {
                    self.delayed -= 1;
                }
            }
            Place::Ready => {
                self.ready.remove(&seq);
            }
            Place::Spent => {
                self.spent.remove(&seq);
            }
        }
    }

    /// Make `seq` invisible until `at`.
    fn hide(&mut self, seq: u64, at: Timestamp) {
        self.unplace(seq);
        let m = self.messages.get_mut(&seq).expect("indexed message exists");
        m.visible_at = at;
        m.place = Place::Waiting;
        if m.receive_count == 0 {
            self.delayed += 1;
        }
        self.waiting.insert((at, seq));
    }

    fn insert(&mut self, seq: u64, m: Stored) {
        debug_assert_eq!(m.place, Place::Waiting);
        self.waiting.insert((m.visible_at, seq));
        self.by_age.insert((m.ready_at, seq));
        if m.receive_count == 0 {
            self.delayed += 1;
        }
        self.messages.insert(seq, m);
    }

    /// The message a receipt handle names: the latest handle always, an older one only when
    /// older handles act (and the message is still there).
    fn find(&self, handle: &str, mode: StaleHandles) -> Option<u64> {
        let (seq, n) = parse_receipt(handle)?;
        let m = self.messages.get(&seq)?;
        // Handle n was given by the message's n-th receive: the latest is its receive count.
        let latest = n == m.receive_count;
        let older = n < m.receive_count && mode == StaleHandles::Act;
        (latest || older).then_some(seq)
    }

    fn remove(&mut self, seq: u64) -> Stored {
        self.unplace(seq);
        let m = self.messages.remove(&seq).expect("indexed message exists");
        self.by_age.remove(&(m.ready_at, seq));
        m
    }
}

/// What a delete or a visibility change does with a receipt handle older than the message's
/// latest. SQS documents only that the latest handle is required: an older one may or may not
/// act, so the consumer must be safe under both, and the chaos worlds run both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StaleHandles {
    /// An older handle does nothing (a delete is a no-op, a visibility change is refused).
    #[default]
    Ignored,
    /// An older handle acts on the message, as the latest would.
    Act,
}

/// In-memory queues, one per channel. Use one instance as the delivery queues and another as
/// the DLQs.
#[derive(Debug)]
pub struct MemoryQueue<C> {
    clock: C,
    queues: Mutex<BTreeMap<Channel, Channelq>>,
    next_id: Mutex<u64>,
    /// The queue's redrive policy: past this many receives, a message moves to the DLQ.
    redrive: Option<(u32, Arc<MemoryQueue<C>>)>,
    stale_handles: StaleHandles,
}

impl<C: Clock> MemoryQueue<C> {
    pub fn new(clock: C) -> Self {
        Self {
            clock,
            queues: Mutex::default(),
            next_id: Mutex::new(0),
            redrive: None,
            stale_handles: StaleHandles::default(),
        }
    }

    /// What an older receipt handle does.
    pub fn with_stale_handles(mut self, mode: StaleHandles) -> Self {
        self.stale_handles = mode;
        self
    }

    /// Give the queues a redrive policy (`maxReceiveCount`) into `dlq`, as SQS does.
    pub fn with_redrive(mut self, max_receive_count: u32, dlq: Arc<MemoryQueue<C>>) -> Self {
        self.redrive = Some((max_receive_count.max(1), dlq));
        self
    }

    fn max_receives(&self) -> Option<u32> {
        self.redrive.as_ref().map(|(max, _)| *max)
    }

    /// Messages in the channel's queue, visible or not.
    pub fn len(&self, channel: Channel) -> usize {
        lock(&self.queues)
            .get(&channel)
            .map_or(0, |q| q.messages.len())
    }

    /// The bodies of every message in the channel's queue, visible or not, without receiving
    /// them (for tests and the simulation's accounting).
    pub fn peek_all(&self, channel: Channel) -> Vec<String> {
        lock(&self.queues)
            .get(&channel)
            .map(|q| q.messages.values().map(|m| m.body.clone()).collect())
            .unwrap_or_default()
    }

    /// Every message of the channel's queue with its dead letter (reason and evidence), visible
    /// or not, without receiving them.
    pub fn peek_letters(&self, channel: Channel) -> Vec<(String, DeadLetter)> {
        lock(&self.queues)
            .get(&channel)
            .map(|q| {
                q.messages
                    .values()
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
        let mut queues = lock(&self.queues);
        let Some(q) = queues.get_mut(&channel) else {
            return QueueDepth::default();
        };
        q.promote(now, self.max_receives());
        QueueDepth {
            visible: count(q.ready.len() + q.spent.len()),
            delayed: count(q.delayed),
            in_flight: count(q.waiting.len() - q.delayed),
        }
    }

    /// When the oldest receivable message of the channel became receivable (a message still
    /// inside its DelaySeconds is not waiting yet).
    pub fn oldest_ready_at(&self, channel: Channel) -> Option<Timestamp> {
        let now = self.clock.now();
        lock(&self.queues)
            .get(&channel)
            .and_then(|q| q.by_age.first())
            .map(|(ready_at, _)| *ready_at)
            .filter(|r| *r <= now)
    }

    fn push(&self, channel: Channel, body: &str, attrs: BTreeMap<String, String>, delay: u32) {
        let now = self.clock.now();
        let seq = {
            let mut n = lock(&self.next_id);
            *n += 1;
            *n
        };
        let at = now.plus(Duration::from_secs(u64::from(delay)));
        let stored = Stored {
            body: body.to_owned(),
            attributes: attrs,
            sent_at: now,
            ready_at: at,
            visible_at: at,
            receive_count: 0,
            place: Place::Waiting,
        };
        lock(&self.queues)
            .entry(channel)
            .or_default()
            .insert(seq, stored);
    }

    fn take(&self, channel: Channel, max: u32, visibility: u32) -> Vec<ReceivedMessage> {
        let now = self.clock.now();
        let mut queues = lock(&self.queues);
        let Some(q) = queues.get_mut(&channel) else {
            return Vec::new();
        };
        q.promote(now, self.max_receives());
        if let Some((_, dlq)) = &self.redrive {
            while let Some(seq) = q.spent.first().copied() {
                // Moved by the redrive policy: body and attributes as they were.
                let m = q.remove(seq);
                dlq.push(channel, &m.body, m.attributes, 0);
            }
        }
        let chosen: Vec<u64> = q.ready.iter().take(max as usize).copied().collect();
        let hidden_until = now.plus(Duration::from_secs(u64::from(visibility)));
        chosen
            .into_iter()
            .map(|seq| {
                // Counted first: a received message is in flight, not delayed, once hidden.
                let m = q.messages.get_mut(&seq).expect("indexed message exists");
                m.receive_count += 1;
                q.hide(seq, hidden_until);
                let m = &q.messages[&seq];
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
                    message_id: message_id(seq),
                    receipt_handle: receipt(seq, m.receive_count),
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
        let mode = self.stale_handles;
        let found = queues
            .get_mut(&channel)
            .and_then(|q| q.find(receipt, mode).map(|seq| (q, seq)));
        match found {
            Some((q, seq)) => {
                q.hide(seq, now.plus(Duration::from_secs(u64::from(secs))));
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
            if let Some(seq) = q.find(receipt, self.stale_handles) {
                q.remove(seq);
            }
        }
    }
}

/// A message's id: `m-` and its send sequence.
fn message_id(seq: u64) -> String {
    format!("m-{seq:08}")
}

/// The receipt handle of a message's n-th receive.
fn receipt(seq: u64, n: u32) -> String {
    format!("{}#{n}", message_id(seq))
}

/// The (sequence, receive) a handle names, if this queue could have given it out.
fn parse_receipt(handle: &str) -> Option<(u64, u32)> {
    let (id, n) = handle.strip_prefix("m-")?.split_once('#')?;
    let (seq, n) = (id.parse().ok()?, n.parse().ok()?);
    // Only the exact form given out: "m-1#1" or "m-00000001#01" name no message.
    (n >= 1 && receipt(seq, n) == handle).then_some((seq, n))
}

mod ports;
use ports::count;
