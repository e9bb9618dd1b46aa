//! SQS adapters: [`SqsQueues`] (one delivery queue per channel) and [`SqsDeadLetters`] (one DLQ
//! per channel). Receives ask for every system and message attribute, so the consumer sees
//! `ApproximateReceiveCount` and the DLQ reader sees `reason` and `evidence`.

use aws_sdk_sqs::operation::change_message_visibility::ChangeMessageVisibilityError;
use aws_sdk_sqs::operation::delete_message::DeleteMessageError;
use aws_sdk_sqs::operation::receive_message::ReceiveMessageError;
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchError;
use aws_sdk_sqs::types::{
    MessageSystemAttributeName, MessageSystemAttributeNameForSends, MessageSystemAttributeValue,
    SendMessageBatchRequestEntry,
};
use aws_sdk_sqs::Client;

use crate::aws::error::{corrupt, port_error};
use crate::domain::{Channel, PerChannel};
use crate::ports::queue::{QueueDepth, OP_DELETE, OP_DEPTH, OP_RECEIVE, OP_SEND, OP_VISIBILITY};
use crate::ports::{DeliveryQueue, OutgoingMessage, PortError, ReceivedMessage, SendFailure};

/// The error kind of an SQS operation's typed error; the listed extra variants are refusals
/// too (a request that can never succeed as sent).
macro_rules! sqs_kind {
    ($ty:ident $(, $refused:ident)*) => {
        |e: &$ty| match e {
            $ty::RequestThrottled(_) => crate::aws::error::Kind::Throttled,
            $ty::QueueDoesNotExist(_) | $ty::InvalidAddress(_) | $ty::InvalidSecurity(_) => {
                crate::aws::error::Kind::Refused
            }
            $($ty::$refused(_) => crate::aws::error::Kind::Refused,)*
            _ => crate::aws::error::Kind::Unavailable,
        }
    };
}

mod dead_letters;

pub use dead_letters::{FeedbackDeadLetters, SqsDeadLetters};

/// One queue URL per channel.
pub type ChannelUrls = PerChannel<String>;

/// The channel queues. `wait_secs` is the receive long-poll (0 for short polls).
#[derive(Debug, Clone)]
pub struct SqsQueues {
    client: Client,
    urls: ChannelUrls,
    wait_secs: i32,
}

impl SqsQueues {
    pub fn new(client: Client, urls: ChannelUrls) -> Self {
        Self {
            client,
            urls,
            wait_secs: 0,
        }
    }

    pub fn with_long_poll(mut self, wait_secs: i32) -> Self {
        self.wait_secs = wait_secs.clamp(0, 20);
        self
    }
}

impl SqsQueues {
    async fn receive_from(
        &self,
        url: &str,
        max: u32,
        visibility: u32,
    ) -> Result<Vec<ReceivedMessage>, PortError> {
        let out = self
            .client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(max.clamp(1, 10) as i32)
            .visibility_timeout(i32::try_from(visibility).unwrap_or(i32::MAX))
            .wait_time_seconds(self.wait_secs)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| port_error(OP_RECEIVE, e, sqs_kind!(ReceiveMessageError)))?;
        Ok(out.messages().iter().filter_map(to_received).collect())
    }

    async fn set_visibility(&self, url: &str, receipt: &str, secs: u32) -> Result<(), PortError> {
        self.client
            .change_message_visibility()
            .queue_url(url)
            .receipt_handle(receipt)
            .visibility_timeout(i32::try_from(secs).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| {
                port_error(
                    OP_VISIBILITY,
                    e,
                    sqs_kind!(
                        ChangeMessageVisibilityError,
                        ReceiptHandleIsInvalid,
                        MessageNotInflight
                    ),
                )
            })?;
        Ok(())
    }

    async fn delete_from(&self, url: &str, receipt: &str) -> Result<(), PortError> {
        self.client
            .delete_message()
            .queue_url(url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| {
                port_error(
                    OP_DELETE,
                    e,
                    sqs_kind!(DeleteMessageError, ReceiptHandleIsInvalid),
                )
            })?;
        Ok(())
    }
}

/// `None` for a message without an id, receipt handle or body, which SQS never sends: it is
/// logged and left to its visibility timeout rather than processed as empty.
fn to_received(m: &aws_sdk_sqs::types::Message) -> Option<ReceivedMessage> {
    let (Some(id), Some(receipt), Some(body)) = (m.message_id(), m.receipt_handle(), m.body())
    else {
        tracing::error!(message_id = ?m.message_id(), "received message lacks id, receipt or body");
        return None;
    };
    let attributes = m
        .message_attributes()
        .map(|attrs| {
            attrs
                .iter()
                .filter_map(|(k, v)| v.string_value().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let system = m
        .attributes()
        .map(|attrs| {
            attrs
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    Some(ReceivedMessage {
        message_id: id.to_owned(),
        receipt_handle: receipt.to_owned(),
        body: body.to_owned(),
        attributes,
        system,
    })
}

/// The invocation's X-Ray trace header, which the Lambda runtime sets in `_X_AMZN_TRACE_ID`
/// for each invocation when tracing is on (the template's `Tracing=Active`): sent as the
/// message's `AWSTraceHeader`, so the consumer's record continues the scheduler's trace.
fn trace_header() -> Result<Option<MessageSystemAttributeValue>, PortError> {
    let header = std::env::var("_X_AMZN_TRACE_ID").ok();
    // SQS refuses the whole batch for a malformed header: pass on only a well-formed one.
    let Some(header) = header.filter(|h| is_trace_header(h)) else {
        return Ok(None);
    };
    MessageSystemAttributeValue::builder()
        .data_type("String")
        .string_value(header)
        .build()
        .map(Some)
        .map_err(|e| corrupt(OP_SEND, e))
}

/// An X-Ray trace header as SQS takes it: `Root=1-<8 hex>-<24 hex>`, then optional
/// `;Parent=…;Sampled=…` fields, printable ASCII, at most 256 bytes.
fn is_trace_header(h: &str) -> bool {
    let Some(root) = h.strip_prefix("Root=1-") else {
        return false;
    };
    let id = root.split(';').next().unwrap_or_default();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let well_formed =
        matches!(id.split_once('-'), Some((time, rest)) if hex(time, 8) && hex(rest, 24));
    well_formed && h.len() <= 256 && h.bytes().all(|b| b.is_ascii_graphic())
}

impl DeliveryQueue for SqsQueues {
    async fn send_batch(
        &self,
        channel: Channel,
        messages: &[OutgoingMessage],
    ) -> Result<Vec<SendFailure>, PortError> {
        let mut entries = Vec::with_capacity(messages.len());
        let trace = trace_header()?;
        for m in messages {
            let mut entry = SendMessageBatchRequestEntry::builder()
                .id(&m.entry_id)
                .message_body(&m.body)
                .delay_seconds(m.delay_secs.min(900) as i32);
            if let Some(trace) = &trace {
                entry = entry.message_system_attributes(
                    MessageSystemAttributeNameForSends::AwsTraceHeader,
                    trace.clone(),
                );
            }
            entries.push(entry.build().map_err(|e| corrupt(OP_SEND, e))?);
        }
        let out = self
            .client
            .send_message_batch()
            .queue_url(self.urls.get(channel))
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| {
                port_error(
                    OP_SEND,
                    e,
                    sqs_kind!(
                        SendMessageBatchError,
                        BatchEntryIdsNotDistinct,
                        BatchRequestTooLong,
                        EmptyBatchRequest,
                        InvalidBatchEntryId,
                        TooManyEntriesInBatchRequest
                    ),
                )
            })?;
        Ok(out
            .failed()
            .iter()
            .map(|f| SendFailure {
                entry_id: f.id().to_owned(),
                sender_fault: f.sender_fault(),
                code: f.code().to_owned(),
            })
            .collect())
    }

    async fn change_visibility(
        &self,
        channel: Channel,
        receipt: &str,
        secs: u32,
    ) -> Result<(), PortError> {
        self.set_visibility(self.urls.get(channel), receipt, secs)
            .await
    }

    async fn delete(&self, channel: Channel, receipt: &str) -> Result<(), PortError> {
        self.delete_from(self.urls.get(channel), receipt).await
    }

    async fn receive(
        &self,
        channel: Channel,
        max: u32,
        visibility: u32,
    ) -> Result<Vec<ReceivedMessage>, PortError> {
        self.receive_from(self.urls.get(channel), max, visibility)
            .await
    }

    async fn depth(&self, channel: Channel) -> Result<QueueDepth, PortError> {
        use aws_sdk_sqs::operation::get_queue_attributes::GetQueueAttributesError;
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(self.urls.get(channel))
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(A::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .map_err(|e| port_error(OP_DEPTH, e, sqs_kind!(GetQueueAttributesError)))?;
        let attrs = out.attributes.unwrap_or_default();
        let n = |a: A| attrs.get(&a).and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok(QueueDepth {
            visible: n(A::ApproximateNumberOfMessages),
            in_flight: n(A::ApproximateNumberOfMessagesNotVisible),
            delayed: n(A::ApproximateNumberOfMessagesDelayed),
        })
    }
}
#[cfg(test)]
mod tests {
    use super::is_trace_header;

    #[test]
    fn only_a_well_formed_trace_header_is_passed_on() {
        let root = "Root=1-5759e988-bd862e3fe1be46a994272793";
        assert!(is_trace_header(root));
        assert!(is_trace_header(&format!(
            "{root};Parent=53995c3f42cd8ad8;Sampled=1"
        )));
        for bad in [
            "",
            "Root=1-5759e988",
            "Root=2-5759e988-bd862e3fe1be46a994272793",
            "Root=1-5759e98g-bd862e3fe1be46a994272793",
            "Root=1-5759e988-bd862e3fe1be46a99427279",
            "Parent=53995c3f42cd8ad8;Root=1-5759e988-bd862e3fe1be46a994272793",
            "Root=1-5759e988-bd862e3fe1be46a994272793; Sampled=1",
        ] {
            assert!(!is_trace_header(bad), "{bad:?}");
        }
        assert!(!is_trace_header(&format!("{root};{}", "x".repeat(300))));
    }
}
