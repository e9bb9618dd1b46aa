//! The model of a world's queues and dead-letter queues ([`Adapter`]): partial batch failures,
//! lost fallback messages ([`super::Plant::LoseFallbackMessages`]), at-least-once copies, and
//! each receive told to the checker.

use std::future::Future;
use std::sync::Arc;

use super::adapter::{typed, Adapter};
use super::VirtualClock;
use crate::around::{cast, Call, Hook, Next, Value};
use reminders_core::deadletter::DeadLetter;
use reminders_core::domain::Channel;
use reminders_core::ports::queue::{OP_DEAD_DELETE, OP_DEAD_RECEIVE, OP_DEAD_RELEASE};
use reminders_core::ports::{
    DeadLetters, DeliveryQueue, MemoryQueue, OutgoingMessage, PortError, ReceivedMessage,
    SendFailure,
};

type Queue = Arc<MemoryQueue<VirtualClock>>;

/// The model of a channel's queue and its dead-letter queue: the dice around each call, a
/// batch's partial failures, each receive told to the checker, at-least-once copies, and the
/// plants.
impl Hook for Adapter<Queue> {
    async fn around<R: Value>(&self, call: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        match call {
            Call::SendBatch { channel, messages } => {
                self.send_batch(*channel, messages).await.map(cast)
            }
            Call::Receive { channel, .. } => self.receive(*channel, typed(next())).await.map(cast),
            Call::DeadLetter { channel, body, .. } => {
                let answer = self.dead_letter(*channel, body, || typed(next()));
                answer.await.map(cast)
            }
            Call::ReceiveDead { .. } => self.dice.around(OP_DEAD_RECEIVE, next()).await,
            Call::DeleteDead { .. } => self.dice.around(OP_DEAD_DELETE, next()).await,
            Call::ReleaseDead { .. } => self.dice.around(OP_DEAD_RELEASE, next()).await,
            _ => self.dice.around(call.name(), next()).await,
        }
    }
}

impl Adapter<Queue> {
    /// A partial failure: SQS answers some entries failed, and sends the others (on the queue
    /// itself).
    async fn send_batch(
        &self,
        channel: Channel,
        messages: &[OutgoingMessage],
    ) -> Result<Vec<SendFailure>, PortError> {
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
        let call = self.store.send_batch(channel, &sent);
        let mut out = self
            .dice
            .around(reminders_core::ports::queue::OP_SEND, call)
            .await?;
        out.extend(failed);
        Ok(out)
    }

    async fn receive(
        &self,
        channel: Channel,
        next: impl Future<Output = Result<Vec<ReceivedMessage>, PortError>>,
    ) -> Result<Vec<ReceivedMessage>, PortError> {
        let call = async {
            let out = next.await;
            if let (Ok(got), Some(heard)) = (&out, &self.heard) {
                heard(got);
            }
            out
        };
        let got = self
            .dice
            .around(reminders_core::ports::queue::OP_RECEIVE, call)
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
                let _ = self.store.send_batch(channel, &[copy]).await;
            }
        }
        Ok(got)
    }

    /// [`super::Plant::LoseFallbackMessages`]: a fallback's message is answered sent and
    /// dropped, and its key remembered; [`super::Plant::FallbackBestEffort`]: dropped alone,
    /// and so is a message a redriven delivery enqueues again for a channel with no item
    /// (the second closing of heads that die out of budget).
    fn lose_fallbacks(&self, messages: &[OutgoingMessage]) -> Vec<OutgoingMessage> {
        let remember = match self.plant {
            Some(super::Plant::LoseFallbackMessages) => true,
            Some(super::Plant::FallbackBestEffort) => false,
            _ => return messages.to_vec(),
        };
        let mut kept = Vec::new();
        for m in messages {
            match reminders_core::domain::DeliveryMessage::decode(&m.body) {
                _ if !remember && m.entry_id == reminders_core::consumer::REWAKE_ENTRY => {}
                Ok(msg) if msg.fallback_from.is_some() => {
                    if remember {
                        reminders_core::sync::lock(&self.losing).insert(msg.delivery_key);
                    }
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
            let key =
                reminders_core::domain::DeliveryMessage::decode(&m.body).map(|m| m.delivery_key);
            let lost = key.is_ok_and(|k| reminders_core::sync::lock(&self.losing).contains(&k));
            if lost {
                let _ = self.store.delete(channel, &m.receipt_handle).await;
            } else {
                kept.push(m);
            }
        }
        kept
    }

    async fn dead_letter<F>(
        &self,
        channel: Channel,
        body: &str,
        next: impl Fn() -> F,
    ) -> Result<(), PortError>
    where
        F: Future<Output = Result<(), PortError>>,
    {
        if self.plant == Some(super::Plant::DropDeadLetters) {
            return Ok(());
        }
        if self.plant == Some(super::Plant::DoubleDeadLetters) {
            next().await?;
        }
        if self.plant == Some(super::Plant::StripDeadLetterReason) {
            let bare = DeadLetter::from_attributes(&Default::default());
            return self.store.dead_letter(channel, body, &bare).await;
        }
        self.dice
            .around(reminders_core::ports::queue::OP_DEAD_LETTER, next())
            .await
    }
}
