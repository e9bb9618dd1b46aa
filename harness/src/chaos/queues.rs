//! [`Chaotic`] queues and dead-letter queues: partial batch failures, lost fallback messages
//! ([`super::Plant::LoseFallbackMessages`]), and each receive told to the checker.

use super::inject::Chaotic;
use reminders_core::deadletter::DeadLetter;
use reminders_core::domain::Channel;
use reminders_core::ports::{
    DeadLetterMessage, DeadLetters, DeliveryQueue, OutgoingMessage, PortError, QueueDepth,
    ReceivedMessage, SendFailure,
};

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
        let mut out = self
            .dice
            .around(reminders_core::ports::queue::OP_SEND, call)
            .await?;
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
            .around(reminders_core::ports::queue::OP_VISIBILITY, call)
            .await
    }
    async fn delete(&self, channel: Channel, handle: &str) -> Result<(), PortError> {
        let call = self.inner.delete(channel, handle);
        self.dice
            .around(reminders_core::ports::queue::OP_DELETE, call)
            .await
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
                let _ = self.inner.send_batch(channel, &[copy]).await;
            }
        }
        Ok(got)
    }
    async fn depth(&self, channel: Channel) -> Result<QueueDepth, PortError> {
        self.dice
            .around(
                reminders_core::ports::queue::OP_DEPTH,
                self.inner.depth(channel),
            )
            .await
    }
}

impl<T: DeliveryQueue> Chaotic<T> {
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
                        reminders_core::ports::faults::lock(&self.losing).insert(msg.delivery_key);
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
            let lost =
                key.is_ok_and(|k| reminders_core::ports::faults::lock(&self.losing).contains(&k));
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
            .around(reminders_core::ports::queue::OP_DEAD_LETTER, call)
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
            .around(reminders_core::ports::queue::OP_DEAD_RECEIVE, call)
            .await
    }
    async fn delete_dead(&self, channel: Channel, handle: &str) -> Result<(), PortError> {
        let call = self.inner.delete_dead(channel, handle);
        self.dice
            .around(reminders_core::ports::queue::OP_DEAD_DELETE, call)
            .await
    }
    async fn release_dead(&self, channel: Channel, handle: &str) -> Result<(), PortError> {
        let call = self.inner.release_dead(channel, handle);
        self.dice
            .around(reminders_core::ports::queue::OP_DEAD_RELEASE, call)
            .await
    }
}
