//! The dead-letter queues on SQS: [`SqsDeadLetters`] (one per channel, each letter with its
//! `reason` and `evidence` attributes) and [`FeedbackDeadLetters`] (the feedback queue's).

use aws_sdk_sqs::operation::send_message::SendMessageError;
use aws_sdk_sqs::types::MessageAttributeValue;
use aws_sdk_sqs::Client;

use super::{ChannelUrls, SqsQueues};
use crate::aws::error::{corrupt, port_error};
use crate::deadletter::DeadLetter;
use crate::domain::Channel;
use crate::ports::queue::OP_DEAD_LETTER;
use crate::ports::{DeadLetterMessage, DeadLetters, PortError};

/// The channel DLQs.
#[derive(Debug, Clone)]
pub struct SqsDeadLetters {
    inner: SqsQueues,
}

impl SqsDeadLetters {
    pub fn new(client: Client, urls: ChannelUrls) -> Self {
        Self {
            inner: SqsQueues::new(client, urls),
        }
    }

    pub fn with_long_poll(self, wait_secs: i32) -> Self {
        Self {
            inner: self.inner.with_long_poll(wait_secs),
        }
    }
}

impl DeadLetters for SqsDeadLetters {
    async fn dead_letter(
        &self,
        channel: Channel,
        body: &str,
        letter: &DeadLetter,
    ) -> Result<(), PortError> {
        let url = self.inner.urls.get(channel);
        send_with_attributes(&self.inner.client, url, body, letter.to_attributes()).await
    }

    async fn receive_dead(
        &self,
        channel: Channel,
        max: u32,
        visibility: u32,
    ) -> Result<Vec<DeadLetterMessage>, PortError> {
        let received = self
            .inner
            .receive_from(self.inner.urls.get(channel), max, visibility)
            .await?;
        Ok(received
            .into_iter()
            .map(|message| DeadLetterMessage {
                letter: DeadLetter::from_attributes(&message.attributes),
                message,
            })
            .collect())
    }

    async fn delete_dead(&self, channel: Channel, receipt: &str) -> Result<(), PortError> {
        self.inner
            .delete_from(self.inner.urls.get(channel), receipt)
            .await
    }

    async fn release_dead(&self, channel: Channel, receipt: &str) -> Result<(), PortError> {
        self.inner
            .set_visibility(self.inner.urls.get(channel), receipt, 0)
            .await
    }
}

/// The feedback queue's DLQ (`FEEDBACK_DLQ_URL`): a body that is not SES feedback goes there
/// at once with its `reason` attribute, rather than through the redrive policy's retries with
/// none.
#[derive(Debug, Clone)]
pub struct FeedbackDeadLetters {
    client: Client,
    url: String,
}

impl FeedbackDeadLetters {
    pub fn new(client: Client, url: String) -> Self {
        Self { client, url }
    }

    pub async fn dead_letter(&self, body: &str, reason: &str) -> Result<(), PortError> {
        // The head of a body too big to carry beside its attributes (SQS's 256 KiB).
        let mut cut = body.len().min(200 * 1024);
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        let reason = [(crate::deadletter::ATTR_REASON.to_owned(), reason.to_owned())];
        send_with_attributes(&self.client, &self.url, &body[..cut], reason).await
    }
}

/// One dead letter: `body` with string message attributes.
async fn send_with_attributes(
    client: &Client,
    url: &str,
    body: &str,
    attributes: impl IntoIterator<Item = (String, String)>,
) -> Result<(), PortError> {
    let mut attrs = std::collections::HashMap::new();
    for (k, v) in attributes {
        attrs.insert(k, string_attr(&v)?);
    }
    client
        .send_message()
        .queue_url(url)
        .message_body(body)
        .set_message_attributes(Some(attrs))
        .send()
        .await
        .map_err(|e| port_error(OP_DEAD_LETTER, e, sqs_kind!(SendMessageError)))?;
    Ok(())
}

fn string_attr(value: &str) -> Result<MessageAttributeValue, PortError> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| corrupt(OP_DEAD_LETTER, e))
}
