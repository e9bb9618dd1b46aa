//! DynamoDB adapters: the reminders table ([`reminders`]), the deliveries ledger ([`ledger`])
//! and the provider gate items that share its table ([`gate`]).
//!
//! Items are (de)serialized with `serde_dynamo` from the domain types, so the attribute names
//! are the field names documented in docs/data-formats.md. Times are epoch milliseconds (N), except
//! the TTL attribute `expires_at`, in epoch seconds.

mod eraser;
pub mod gate;
mod item;
pub mod ledger;
mod operator;
pub mod reminders;
pub mod series;
mod subscriber;
pub mod suppression;

pub use gate::DynamoGate;

/// The stored-reminder decoder, on its own (for fuzzing and tests): a whole reminder, or why it
/// cannot be sent, naming the attribute at fault.
pub fn decode_reminder_item(
    item: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> Result<crate::domain::Reminder, String> {
    item::reminder(item)
}

/// One due-index item, decoded on its own (for fuzzing and tests).
pub fn decode_due_item(
    item: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> crate::ports::DueEntry {
    item::due_entry(item)
}
/// A ledger item, decoded on its own (for fuzzing and tests).
pub fn decode_ledger_item(
    item: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> Result<crate::ledger::DeliveryRecord, String> {
    serde_dynamo::aws_sdk_dynamodb_1::from_item(item).map_err(|e| e.to_string())
}

/// A ledger record as the adapter stores it (for fuzzing and tests).
pub fn encode_ledger_item(
    record: &crate::ledger::DeliveryRecord,
) -> Result<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>, String> {
    serde_dynamo::aws_sdk_dynamodb_1::to_item(record).map_err(|e| e.to_string())
}

pub use ledger::DynamoLedger;
pub use reminders::DynamoReminderStore;

use aws_sdk_dynamodb::types::AttributeValue;

/// The error kind of any DynamoDB data-plane operation's typed error.
macro_rules! dynamo_kind {
    ($ty:ident) => {
        |e: &$ty| match e {
            $ty::ProvisionedThroughputExceededException(_)
            | $ty::RequestLimitExceeded(_)
            | $ty::ThrottlingException(_) => $crate::aws::error::Kind::Throttled,
            $ty::ResourceNotFoundException(_) | $ty::InvalidEndpointException(_) => {
                $crate::aws::error::Kind::Refused
            }
            _ => $crate::aws::error::Kind::Unavailable,
        }
    };
}
pub(crate) use dynamo_kind;

/// Name of the sparse due-time index on the reminders table (the first one: it does not
/// project recipients, and a deployed index's projection cannot change).
pub const DUE_INDEX: &str = "due-index";
/// The same index projecting `recipients` too, so the scheduler can put the address's keyed
/// hash on a sole channel's message (the consumer's one read). Added beside `due-index`
/// (CloudFormation creates one index per update); the scheduler reads it once it answers, and
/// `due-index` until then (a deploy in progress, the backfill).
pub const DUE_RECIPIENTS_INDEX: &str = "due-recipients-index";
/// Name of the reminders table's index by subscriber, newest due first (every reminder).
pub const SUBSCRIBER_INDEX: &str = "subscriber-index";

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
