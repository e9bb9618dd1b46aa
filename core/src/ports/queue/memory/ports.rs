//! The queue and DLQ ports of [`MemoryQueue`], with SQS's batch rules.

use std::collections::BTreeMap;

use super::super::*;
use super::MemoryQueue;
use crate::clock::Clock;
use crate::deadletter::DeadLetter;
use crate::domain::Channel;
use crate::ports::PortError;

pub(super) fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
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
        check_batch(messages)?;
        for m in messages {
            self.push(channel, &m.body, BTreeMap::new(), m.delay_secs.min(900));
        }
        Ok(Vec::new())
    }

    async fn change_visibility(
        &self,
        channel: Channel,
        receipt: &str,
        secs: u32,
    ) -> Result<(), PortError> {
        self.set_visibility(channel, receipt, secs)
    }

    async fn delete(&self, channel: Channel, receipt: &str) -> Result<(), PortError> {
        self.remove(channel, receipt);
        Ok(())
    }

    async fn receive(
        &self,
        channel: Channel,
        max: u32,
        visibility: u32,
    ) -> Result<Vec<ReceivedMessage>, PortError> {
        Ok(self.take(channel, max, visibility))
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
    }

    async fn receive_dead(
        &self,
        channel: Channel,
        max: u32,
        visibility: u32,
    ) -> Result<Vec<DeadLetterMessage>, PortError> {
        Ok(self
            .take(channel, max, visibility)
            .into_iter()
            .map(|message| DeadLetterMessage {
                letter: DeadLetter::from_attributes(&message.attributes),
                message,
            })
            .collect())
    }

    async fn delete_dead(&self, channel: Channel, receipt: &str) -> Result<(), PortError> {
        self.remove(channel, receipt);
        Ok(())
    }

    async fn release_dead(&self, channel: Channel, receipt: &str) -> Result<(), PortError> {
        self.set_visibility(channel, receipt, 0)
    }
}
