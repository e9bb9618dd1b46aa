//! An SQS event source mapping, played: receive up to a batch, build the `SqsEvent` Lambda
//! would, invoke the consumer, delete what succeeded; a batch item failure keeps its visibility
//! and comes back. The local runner, the chaos worlds, the simulation, the benchmarks and the
//! tests play it through [`Mapping`]; what each needs to see or do around a batch is a
//! [`BatchObserver`]. A caller that needs the steps apart (two batches handled at once, events
//! built ahead of a timed loop) receives with [`Mapping::receive`], invokes the consumer
//! itself, and deletes with [`Mapping::finish`] if it wants the successes gone.

use std::future::Future;

use aws_lambda_events::event::sqs::SqsEvent;
use reminders_core::clock::Timestamp;
use reminders_core::consumer::event::{arn_for_url, to_sqs_event};
use reminders_core::consumer::{BatchOutcome, Consumer};
use reminders_core::domain::{Channel, PerChannel};
use reminders_core::ports::{DeliveryQueue, PortError, Ports, ReceivedMessage};

/// One channel's event source mapping: its queue, batch size and the visibility it receives
/// with.
#[derive(Debug, Clone)]
pub struct Mapping {
    channel: Channel,
    batch_size: u32,
    visibility_secs: u32,
    /// The queue's ARN, as the records of the event name it (the consumer reads the channel
    /// from it).
    arn: String,
}

/// One received batch: the messages, and the event a Lambda invocation is given for them.
#[derive(Debug, Clone)]
pub struct Batch {
    pub messages: Vec<ReceivedMessage>,
    pub event: SqsEvent,
}

/// What a player of the mapping sees or does around one batch. Every method has a default
/// that does nothing, so `()` observes nothing.
pub trait BatchObserver: Sync {
    /// The batch was received; the consumer is not invoked yet.
    fn received(&self, _batch: &Batch) -> impl Future<Output = ()> {
        async {}
    }

    /// When the invocation must end, asked as it starts: after the receive, as Lambda's
    /// clock starts at the invocation. `None`: no deadline.
    fn deadline(&self) -> Option<Timestamp> {
        None
    }

    /// The invocation, to run inside what the observer sets up (a task-local, say).
    fn invoke<F>(&self, invocation: F) -> impl Future<Output = BatchOutcome>
    where
        F: Future<Output = BatchOutcome>,
    {
        invocation
    }

    /// The invocation's answer, before its successes are deleted.
    fn handled(&self, _out: &BatchOutcome) {}
}

impl BatchObserver for () {}

/// An invocation deadline known before the poll, and nothing else observed.
struct By(Option<Timestamp>);

impl BatchObserver for By {
    fn deadline(&self) -> Option<Timestamp> {
        self.0
    }
}

impl Mapping {
    /// The mapping of `channel`'s queue (its URL in `queue_urls`).
    pub fn new(
        queue_urls: &PerChannel<String>,
        channel: Channel,
        batch_size: u32,
        visibility_secs: u32,
    ) -> Self {
        Self {
            channel,
            batch_size,
            visibility_secs,
            arn: arn_for_url(queue_urls.get(channel), "local"),
        }
    }

    pub fn channel(&self) -> Channel {
        self.channel
    }

    /// Receive up to a batch: `None` when nothing was visible.
    pub async fn receive<Q: DeliveryQueue>(&self, queue: &Q) -> Result<Option<Batch>, PortError> {
        let messages = queue
            .receive(self.channel, self.batch_size, self.visibility_secs)
            .await?;
        if messages.is_empty() {
            return Ok(None);
        }
        let event = to_sqs_event(&self.arn, &messages);
        Ok(Some(Batch { messages, event }))
    }

    /// Delete each message of `batch` the answer does not name as a failure. Every delete is
    /// tried; the first error is the answer.
    pub async fn finish<Q: DeliveryQueue>(
        &self,
        queue: &Q,
        batch: &Batch,
        out: &BatchOutcome,
    ) -> Result<(), PortError> {
        let failures = &out.response.batch_item_failures;
        let mut first_error = None;
        for m in &batch.messages {
            if failures.iter().any(|f| f.item_identifier == m.message_id) {
                continue;
            }
            if let Err(e) = queue.delete(self.channel, &m.receipt_handle).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// One poll: receive, invoke the consumer with `deadline`, delete what succeeded. `None`
    /// when nothing was visible.
    pub async fn poll<P: Ports>(
        &self,
        consumer: &Consumer<P>,
        deadline: Option<Timestamp>,
    ) -> Result<Option<BatchOutcome>, PortError> {
        self.poll_observed(consumer, &By(deadline)).await
    }

    /// [`Mapping::poll`], with `observer` told of the batch and its answer, and asked for the
    /// invocation's deadline.
    pub async fn poll_observed<P: Ports, O: BatchObserver>(
        &self,
        consumer: &Consumer<P>,
        observer: &O,
    ) -> Result<Option<BatchOutcome>, PortError> {
        let queue = consumer.ports().queue();
        let Some(batch) = self.receive(queue).await? else {
            return Ok(None);
        };
        observer.received(&batch).await;
        let deadline = observer.deadline();
        let out = observer
            .invoke(consumer.handle(batch.event.clone(), deadline))
            .await;
        observer.handled(&out);
        self.finish(queue, &batch, &out).await?;
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse};
    use reminders_core::ports::queue::OP_DELETE;
    use reminders_core::ports::{FaultPoint, MemoryQueue, OutgoingMessage};

    use super::*;
    use crate::around::{Around, Faults};
    use crate::ManualClock;

    /// A delete that fails does not stop the others: every message the answer does not name
    /// as failed is deleted but the one whose delete failed, and that error is the answer.
    #[tokio::test]
    async fn a_failed_delete_leaves_the_rest_of_the_batch_deleted() {
        let clock = ManualClock::at(Timestamp::from_millis(1_800_000_000_000));
        let faults = Faults::default();
        let queue = Around::new(MemoryQueue::new(clock), faults.clone());
        let urls = PerChannel::from_fn(|c| format!("http://q/000000000000/q-{c}"));
        let mapping = Mapping::new(&urls, Channel::Sms, 10, 30);
        let entries: Vec<OutgoingMessage> = (0..3)
            .map(|i| OutgoingMessage {
                entry_id: i.to_string(),
                body: format!("message {i}"),
                delay_secs: 0,
            })
            .collect();
        queue.send_batch(Channel::Sms, &entries).await.unwrap();
        let batch = mapping.receive(&queue).await.unwrap().expect("the three");
        assert_eq!(batch.messages.len(), 3);
        assert_eq!(batch.event.records.len(), 3);
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = batch.messages[1].message_id.clone();
        let mut response = SqsBatchResponse::default();
        response.batch_item_failures.push(failure);
        let out = BatchOutcome {
            response,
            records: Vec::new(),
            metrics: PerChannel::default(),
        };
        faults.fail(OP_DELETE, FaultPoint::Before, 1);
        let finished = mapping.finish(&queue, &batch, &out).await;
        assert!(finished.is_err(), "the failed delete is the answer");
        let depth = queue.depth(Channel::Sms).await.unwrap();
        assert_eq!(
            depth.in_flight, 2,
            "the batch item failure and the message whose delete failed stay: {depth:?}"
        );
        assert_eq!(depth.total(), 2, "{depth:?}");
    }
}
