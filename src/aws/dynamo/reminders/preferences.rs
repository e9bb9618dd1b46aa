//! A subscriber's preferences, an item of the reminders table beside the reminders.

use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;

use super::super::{dynamo_kind, s};
use super::DynamoReminderStore;
use crate::aws::error::{corrupt, port_error};
use crate::domain::{Preferences, SubscriberId};
use crate::ports::reminders::{OP_PREFERENCES, OP_PUT_PREFERENCES};
use crate::ports::PortError;

/// A subscriber's preferences item in the reminders table: `#` never occurs in a reminder id,
/// and the item has no `due_shard` or `due_at`, so neither index holds it. The attribute is
/// `subscriber`, not `subscriber_id`, for the same reason.
pub fn preferences_key(subscriber: &SubscriberId) -> String {
    format!("prefs#{}", subscriber.as_str())
}

/// A preferences item, decoded. Unreadable preferences fail the read: sending against an
/// opt-out this version cannot read is worse than not sending (the consumer ends the delivery
/// `invalid_reminder`, naming the item, with its DLQ copy).
pub(in crate::aws::dynamo) fn decode_preferences(
    mut item: std::collections::HashMap<String, AttributeValue>,
) -> Result<Preferences, PortError> {
    let Some(prefs) = item.remove("preferences") else {
        return Err(corrupt(OP_PREFERENCES, "preferences: missing"));
    };
    serde_dynamo::from_attribute_value(prefs)
        .map_err(|e| corrupt(OP_PREFERENCES, format!("preferences: {e}")))
}

impl DynamoReminderStore {
    /// The subscriber's preferences item, read consistently.
    pub(super) async fn read_preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> Result<Option<Preferences>, PortError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("reminder_id", s(preferences_key(subscriber)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| port_error(OP_PREFERENCES, e, dynamo_kind!(GetItemError)))?;
        out.item.map(decode_preferences).transpose()
    }

    /// The subscriber's preferences item, written whole.
    pub(super) async fn write_preferences(
        &self,
        subscriber: &SubscriberId,
        prefs: &Preferences,
    ) -> Result<(), PortError> {
        let value: AttributeValue =
            serde_dynamo::to_attribute_value(prefs).map_err(|e| corrupt(OP_PUT_PREFERENCES, e))?;
        self.client
            .put_item()
            .table_name(&self.table)
            .item("reminder_id", s(preferences_key(subscriber)))
            .item("kind", s("preferences"))
            .item("subscriber", s(subscriber.as_str()))
            .item("preferences", value)
            .send()
            .await
            .map_err(|e| port_error(OP_PUT_PREFERENCES, e, dynamo_kind!(PutItemError)))?;
        Ok(())
    }
}
