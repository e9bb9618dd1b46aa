//! A channel's queue and its dead-letter queue, around.

use reminders_core::deadletter::DeadLetter;
use reminders_core::domain::Channel;
use reminders_core::ports::{
    DeadLetterMessage, DeadLetters, DeliveryQueue, OutgoingMessage, PortError, QueueDepth,
    ReceivedMessage, SendFailure,
};

use super::{around, Around, Call, Hook};

impl<T: DeliveryQueue, H: Hook> DeliveryQueue for Around<T, H> {
    async fn send_batch(
        &self,
        channel: Channel,
        messages: &[OutgoingMessage],
    ) -> Result<Vec<SendFailure>, PortError> {
        let call = Call::SendBatch { channel, messages };
        self.hook.before(&call).await?;
        let batch = self.hook.batch(messages);
        let out = self.inner.send_batch(channel, &batch).await;
        self.hook.after(
            &call,
            out.as_ref()
                .map(|v| v as &(dyn std::any::Any + Send + Sync)),
        )?;
        out
    }

    async fn change_visibility(
        &self,
        channel: Channel,
        receipt_handle: &str,
        secs: u32,
    ) -> Result<(), PortError> {
        let call = Call::ChangeVisibility {
            channel,
            receipt_handle,
            secs,
        };
        around!(
            self,
            call,
            self.inner.change_visibility(channel, receipt_handle, secs)
        )
    }

    async fn delete(&self, channel: Channel, receipt_handle: &str) -> Result<(), PortError> {
        around!(
            self,
            Call::Delete {
                channel,
                receipt_handle
            },
            self.inner.delete(channel, receipt_handle)
        )
    }

    async fn receive(
        &self,
        channel: Channel,
        max: u32,
        visibility_secs: u32,
    ) -> Result<Vec<ReceivedMessage>, PortError> {
        let call = Call::Receive {
            channel,
            max,
            visibility_secs,
        };
        around!(
            self,
            call,
            self.inner.receive(channel, max, visibility_secs)
        )
    }

    async fn depth(&self, channel: Channel) -> Result<QueueDepth, PortError> {
        around!(self, Call::Depth { channel }, self.inner.depth(channel))
    }
}

impl<T: DeadLetters, H: Hook> DeadLetters for Around<T, H> {
    async fn dead_letter(
        &self,
        channel: Channel,
        body: &str,
        letter: &DeadLetter,
    ) -> Result<(), PortError> {
        around!(
            self,
            Call::DeadLetter {
                channel,
                body,
                letter
            },
            self.inner.dead_letter(channel, body, letter)
        )
    }

    async fn receive_dead(
        &self,
        channel: Channel,
        max: u32,
        visibility_secs: u32,
    ) -> Result<Vec<DeadLetterMessage>, PortError> {
        let call = Call::ReceiveDead {
            channel,
            max,
            visibility_secs,
        };
        around!(
            self,
            call,
            self.inner.receive_dead(channel, max, visibility_secs)
        )
    }

    async fn delete_dead(&self, channel: Channel, receipt_handle: &str) -> Result<(), PortError> {
        around!(
            self,
            Call::DeleteDead {
                channel,
                receipt_handle
            },
            self.inner.delete_dead(channel, receipt_handle)
        )
    }

    async fn release_dead(&self, channel: Channel, receipt_handle: &str) -> Result<(), PortError> {
        around!(
            self,
            Call::ReleaseDead {
                channel,
                receipt_handle
            },
            self.inner.release_dead(channel, receipt_handle)
        )
    }
}
