//! What each fuzz target checks, shared by the cargo-fuzz targets (`fuzz/fuzz_targets`) and
//! the regression test that replays every kept input on stable Rust. Each takes raw bytes and
//! panics only when a property breaks: never on bad input.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use reminders::clock::Timestamp;
use reminders::domain::{Channel, DeliveryMessage, Recipient};
use reminders::redrive::RedriveRequest;

/// Queue message v1: decoding never panics; what decodes re-encodes to an equal message.
pub fn message(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(msg) = DeliveryMessage::decode(text) {
        let again = DeliveryMessage::decode(&msg.encode()).expect("re-encoded message decodes");
        assert_eq!(again, msg);
    }
}

/// A DynamoDB item built from JSON (objects are maps, arrays lists, strings `S` — or `N` with a
/// `n:` prefix, so numbers stored as text are tried — numbers `N`, booleans `BOOL`, null
/// `NULL`): the reminder and due-index decoders never panic.
pub fn reminder_item(data: &[u8]) {
    let Some(item) = item_of(data) else {
        return;
    };
    let _ = reminders::aws::dynamo::decode_reminder_item(item.clone());
    let _ = reminders::aws::dynamo::decode_due_item(item);
}

fn attribute(v: serde_json::Value) -> AttributeValue {
    use serde_json::Value;
    match v {
        Value::Null => AttributeValue::Null(true),
        Value::Bool(b) => AttributeValue::Bool(b),
        Value::Number(n) => AttributeValue::N(n.to_string()),
        Value::String(s) => match s.strip_prefix("n:") {
            Some(n) => AttributeValue::N(n.to_owned()),
            None => AttributeValue::S(s),
        },
        Value::Array(a) => AttributeValue::L(a.into_iter().map(attribute).collect()),
        Value::Object(m) => {
            AttributeValue::M(m.into_iter().map(|(k, v)| (k, attribute(v))).collect())
        }
    }
}

/// The redrive function's input: parsing and validation never panic.
pub fn redrive_request(data: &[u8]) {
    if let Ok(req) = serde_json::from_slice::<RedriveRequest>(data) {
        let _ = req.validate();
    }
}

/// Retry-After: never panics, never answers a time before now. The first 8 bytes are now.
pub fn retry_after(data: &[u8]) {
    if data.len() < 8 {
        return;
    }
    let (head, rest) = data.split_at(8);
    let now_ms = i64::from_le_bytes(head.try_into().unwrap_or([0; 8])) & 0x0000_7fff_ffff_ffff;
    let now = Timestamp::from_millis(now_ms);
    let Ok(raw) = std::str::from_utf8(rest) else {
        return;
    };
    if let Some(at) = reminders::policy::parse_retry_after(raw, now) {
        assert!(at >= now, "{raw:?} at {now} answered {at}");
    }
}

/// Recipients: never panic; an accepted address is kept exactly and parses again the same.
pub fn recipient(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let channel = Channel::ALL[usize::from(which) % Channel::ALL.len()];
    let Ok(raw) = std::str::from_utf8(rest) else {
        return;
    };
    if let Ok(r) = Recipient::parse(channel, raw) {
        assert_eq!(r.expose(), raw);
        assert_eq!(Recipient::parse(channel, r.expose()).ok(), Some(r));
    }
}

/// JSON bytes as a DynamoDB item (see [`reminder_item`] for the mapping).
fn item_of(data: &[u8]) -> Option<HashMap<String, AttributeValue>> {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_slice(data) else {
        return None;
    };
    Some(fields.into_iter().map(|(k, v)| (k, attribute(v))).collect())
}

/// A ledger item (same mapping): the decoder never panics; a record it accepts is stored
/// again as the same record.
pub fn ledger_item(data: &[u8]) {
    let Some(item) = item_of(data) else {
        return;
    };
    if let Ok(record) = reminders::aws::dynamo::decode_ledger_item(item) {
        let stored = reminders::aws::dynamo::encode_ledger_item(&record).expect("re-encodes");
        let again = reminders::aws::dynamo::decode_ledger_item(stored).expect("decodes again");
        assert_eq!(again, record);
    }
}

/// A DLQ message's attributes (a JSON object of strings): reading the reason and evidence
/// never panics, and what was read is written and read back the same.
pub fn dlq_evidence(data: &[u8]) {
    let Ok(attrs) = serde_json::from_slice::<std::collections::BTreeMap<String, String>>(data)
    else {
        return;
    };
    let letter = reminders::deadletter::DeadLetter::from_attributes(&attrs);
    let again = reminders::deadletter::DeadLetter::from_attributes(&letter.to_attributes());
    assert_eq!(again, letter);
}

/// An SQS event as Lambda delivers it: intake (identity, queue, receive count) and the body's
/// decoding never panic, whatever the records hold.
pub fn sqs_event(data: &[u8]) {
    let Ok(event) = serde_json::from_slice::<aws_lambda_events::event::sqs::SqsEvent>(data) else {
        return;
    };
    let urls = reminders::domain::PerChannel::from_fn(|c| {
        format!("https://sqs.us-east-1.amazonaws.com/123456789012/reminders-{c}")
    });
    for record in &event.records {
        if let Ok(incoming) = reminders::consumer::event::incoming(record, &urls) {
            let _ = DeliveryMessage::decode(&incoming.body);
        }
    }
}
