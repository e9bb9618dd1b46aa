//! A channel's queue, its dead-letter queue and the event bus, around.

use reminders_core::deadletter::DeadLetter;
use reminders_core::domain::Channel;
use reminders_core::ports::events::{EventBus, Rejected, Settled};
use reminders_core::ports::{
    DeadLetterMessage, DeadLetters, DeliveryQueue, OutgoingMessage, PortError, QueueDepth,
    ReceivedMessage, SendFailure,
};

use super::{around, forward, Around, Call, Hook};

impl<T: DeliveryQueue, H: Hook> DeliveryQueue for Around<T, H> {
    async fn send_batch(
        &self,
        channel: Channel,
        messages: &[OutgoingMessage],
    ) -> Result<Vec<SendFailure>, PortError> {
        // The batch the hook hands on (moved in time, for the simulation's scheduler), less
        // the entries it fails on their own (a fault plan's).
        let made = || {
            super::boxed(async {
                let batch = self.hook.batch(messages);
                let mut failed = self.hook.failed_entries(&batch);
                if failed.is_empty() {
                    return self.inner.send_batch(channel, &batch).await;
                }
                let rest: Vec<OutgoingMessage> = batch
                    .iter()
                    .filter(|m| failed.iter().all(|f| f.entry_id != m.entry_id))
                    .cloned()
                    .collect();
                if !rest.is_empty() {
                    failed.extend(self.inner.send_batch(channel, &rest).await?);
                }
                Ok(failed)
            })
        };
        self.hook
            .around(&Call::SendBatch { channel, messages }, &made)
            .await
    }

    forward! {
        fn change_visibility(channel: Channel, receipt_handle: &str, secs: u32) -> ()
            as Call::ChangeVisibility { channel, receipt_handle, secs };
        fn delete(channel: Channel, receipt_handle: &str) -> ()
            as Call::Delete { channel, receipt_handle };
        fn receive(channel: Channel, max: u32, visibility_secs: u32) -> Vec<ReceivedMessage>
            as Call::Receive { channel, max, visibility_secs };
        fn depth(channel: Channel) -> QueueDepth as Call::Depth { channel };
    }
}

impl<T: DeadLetters, H: Hook> DeadLetters for Around<T, H> {
    forward! {
        fn dead_letter(channel: Channel, body: &str, letter: &DeadLetter) -> ()
            as Call::DeadLetter { channel, body, letter };
        fn receive_dead(channel: Channel, max: u32, visibility_secs: u32) -> Vec<DeadLetterMessage>
            as Call::ReceiveDead { channel, max, visibility_secs };
        fn delete_dead(channel: Channel, receipt_handle: &str) -> ()
            as Call::DeleteDead { channel, receipt_handle };
        fn release_dead(channel: Channel, receipt_handle: &str) -> ()
            as Call::ReleaseDead { channel, receipt_handle };
    }
}

impl<T: EventBus, H: Hook> EventBus for Around<T, H> {
    forward! {
        fn publish(events: &[Settled]) -> Vec<Rejected> as Call::Publish { events };
    }
}
