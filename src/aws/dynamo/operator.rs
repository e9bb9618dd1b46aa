//! What operators read from the reminders table beyond the port: the raw status of an item
//! that does not decode, and the quarantined reminders (`remindctl remind show | quarantined`).

use aws_sdk_dynamodb::operation::get_item::GetItemError;

use super::reminders::DynamoReminderStore;
use super::{dynamo_kind, s};
use crate::aws::error::port_error;
use crate::domain::ReminderStatus;
use crate::ports::reminders::OP_GET;
use crate::ports::PortError;

impl DynamoReminderStore {
    /// The raw `status` and `invalid_reason` of an item, whatever else it holds: for showing
    /// an item that does not decode.
    pub async fn raw_status(
        &self,
        key: &str,
    ) -> Result<Option<(Option<String>, Option<String>)>, PortError> {
        use aws_sdk_dynamodb::types::AttributeValue;
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("reminder_id", s(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| port_error(OP_GET, e, dynamo_kind!(GetItemError)))?;
        let text =
            |item: &std::collections::HashMap<String, AttributeValue>, k: &str| match item.get(k) {
                Some(AttributeValue::S(v)) => Some(v.clone()),
                _ => None,
            };
        Ok(out
            .item
            .map(|item| (text(&item, "status"), text(&item, "invalid_reason"))))
    }

    /// Up to `limit` quarantined reminders (status `invalid`): raw id and `invalid_reason`.
    /// A scan of the table, filtered: an operator's command, not a hot path.
    pub async fn quarantined(
        &self,
        limit: u32,
    ) -> Result<Vec<(String, Option<String>)>, PortError> {
        use aws_sdk_dynamodb::operation::scan::ScanError;
        use aws_sdk_dynamodb::types::AttributeValue;
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("#status = :invalid")
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":invalid", s(ReminderStatus::Invalid.as_str()))
                .projection_expression("reminder_id, invalid_reason")
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| port_error(OP_GET, e, dynamo_kind!(ScanError)))?;
            for item in page.items.unwrap_or_default() {
                let text = |k: &str| match item.get(k) {
                    Some(AttributeValue::S(v)) => Some(v.clone()),
                    _ => None,
                };
                out.push((
                    text("reminder_id").unwrap_or_default(),
                    text("invalid_reason"),
                ));
                if out.len() >= usize::try_from(limit).unwrap_or(usize::MAX) {
                    return Ok(out);
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(out);
            }
        }
    }
}
