//! The Lambda edge: `SqsEvent` records in, `SqsBatchResponse` out, and the conversion of a
//! `ReceiveMessage` result into the same `SqsEvent`, so the Lambda, the local runner and the
//! embedded pipeline run one code path. The event types are non-exhaustive: built from
//! `Default`.

use std::collections::HashMap;

use aws_lambda_events::event::sqs::{
    BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage, SqsMessageAttribute,
};

use crate::domain::{Channel, PerChannel};
use crate::ports::ReceivedMessage;

/// One record, parsed enough to be processed and answered for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    pub receive_count: u32,
    pub channel: Channel,
    /// The sender's X-Ray trace header (`AWSTraceHeader`), when tracing is on: the record's
    /// span carries it, so a delivery's logs join the scheduler's trace.
    pub trace_header: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EdgeError {
    #[error("record has no messageId or receiptHandle")]
    NoIdentity,
    #[error("record comes from a queue this function is not configured for")]
    UnknownQueue,
}

/// The queue name at the end of a queue URL (`…/<account>/<name>`) or ARN (`…:<name>`).
pub fn queue_name(url_or_arn: &str) -> &str {
    url_or_arn.rsplit(['/', ':']).next().unwrap_or(url_or_arn)
}

/// Which channel's queue an event source ARN names.
pub fn channel_of(arn: &str, queue_urls: &PerChannel<String>) -> Option<Channel> {
    let name = queue_name(arn);
    Channel::ALL
        .into_iter()
        .find(|c| queue_name(queue_urls.get(*c)) == name)
}

pub fn incoming(
    record: &SqsMessage,
    queue_urls: &PerChannel<String>,
) -> Result<Incoming, EdgeError> {
    let (Some(message_id), Some(receipt_handle)) = (&record.message_id, &record.receipt_handle)
    else {
        return Err(EdgeError::NoIdentity);
    };
    let channel = record
        .event_source_arn
        .as_deref()
        .and_then(|arn| channel_of(arn, queue_urls))
        .ok_or(EdgeError::UnknownQueue)?;
    let receive_count = record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|c| c.parse().ok())
        .unwrap_or(1);
    Ok(Incoming {
        message_id: message_id.clone(),
        receipt_handle: receipt_handle.clone(),
        // A missing body decodes as malformed and is dead-lettered with its reason.
        body: record.body.clone().unwrap_or_default(),
        receive_count,
        channel,
        trace_header: record.attributes.get("AWSTraceHeader").cloned(),
    })
}

/// The `SqsEvent` the event source mapping would have built for these messages.
pub fn to_sqs_event(queue_arn: &str, messages: &[ReceivedMessage]) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = messages
        .iter()
        .map(|m| {
            let mut r = SqsMessage::default();
            r.message_id = Some(m.message_id.clone());
            r.receipt_handle = Some(m.receipt_handle.clone());
            r.body = Some(m.body.clone());
            r.attributes = m.system.clone().into_iter().collect();
            r.message_attributes = m
                .attributes
                .iter()
                .map(|(k, v)| {
                    let mut a = SqsMessageAttribute::default();
                    a.string_value = Some(v.clone());
                    a.data_type = Some("String".into());
                    (k.clone(), a)
                })
                .collect::<HashMap<_, _>>();
            r.event_source_arn = Some(queue_arn.to_owned());
            r.event_source = Some("aws:sqs".into());
            r
        })
        .collect();
    event
}

/// An ARN for a queue URL (for the local runner; only the name part is ever read).
pub fn arn_for_url(url: &str, region: &str) -> String {
    let mut parts = url.trim_end_matches('/').rsplit('/');
    let name = parts.next().unwrap_or_default();
    let account = parts.next().unwrap_or("000000000000");
    format!("arn:aws:sqs:{region}:{account}:{name}")
}

pub fn batch_response(failed_message_ids: impl IntoIterator<Item = String>) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failed_message_ids
        .into_iter()
        .map(|id| {
            let mut f = BatchItemFailure::default();
            f.item_identifier = id;
            f
        })
        .collect();
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls() -> PerChannel<String> {
        PerChannel::from_fn(|c| format!("https://sqs.eu-west-1.amazonaws.com/123456789012/app-{c}"))
    }

    #[test]
    fn parses_the_documented_event_shape() {
        let raw = r#"{"Records":[{"messageId":"059f36b4-87a3-44ab-83d2-661975830a7d",
            "receiptHandle":"AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a","body":"test",
            "attributes":{"ApproximateReceiveCount":"3","SentTimestamp":"1545082649183"},
            "messageAttributes":{},"md5OfBody":"098f6bcd4621d373cade4e832627b4f6",
            "eventSource":"aws:sqs",
            "eventSourceARN":"arn:aws:sqs:eu-west-1:123456789012:app-sms","awsRegion":"eu-west-1"}]}"#;
        let event: SqsEvent = serde_json::from_str(raw).unwrap();
        let inc = incoming(&event.records[0], &urls()).unwrap();
        assert_eq!(inc.channel, Channel::Sms);
        assert_eq!(inc.receive_count, 3);
        assert_eq!(inc.body, "test");
    }

    #[test]
    fn unknown_queues_and_missing_ids_are_edge_errors() {
        let mut r = SqsMessage::default();
        assert_eq!(incoming(&r, &urls()), Err(EdgeError::NoIdentity));
        r.message_id = Some("m".into());
        r.receipt_handle = Some("h".into());
        r.event_source_arn = Some("arn:aws:sqs:eu-west-1:1:other".into());
        assert_eq!(incoming(&r, &urls()), Err(EdgeError::UnknownQueue));
    }

    #[test]
    fn received_messages_become_the_same_event() {
        let m = ReceivedMessage {
            message_id: "m-1".into(),
            receipt_handle: "h-1".into(),
            body: "{}".into(),
            attributes: [("reason".to_owned(), "schema".to_owned())].into(),
            system: [("ApproximateReceiveCount".to_owned(), "2".to_owned())].into(),
        };
        let url = "http://127.0.0.1:5000/000000000000/app-push";
        let event = to_sqs_event(&arn_for_url(url, "us-east-1"), &[m]);
        let inc = incoming(&event.records[0], &urls_with(url)).unwrap();
        assert_eq!((inc.channel, inc.receive_count), (Channel::Push, 2));
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json["Records"][0]["messageAttributes"]["reason"]["stringValue"],
            "schema"
        );
        let resp = serde_json::to_value(batch_response(["m-1".to_owned()])).unwrap();
        assert_eq!(resp["batchItemFailures"][0]["itemIdentifier"], "m-1");
    }

    fn urls_with(push: &str) -> PerChannel<String> {
        let mut u = urls();
        u.push = push.to_owned();
        u
    }
}
