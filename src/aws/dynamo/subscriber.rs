//! The reminders table's `subscriber-index` (`subscriber_id` HASH, `due_at` RANGE), read
//! newest due first.

use aws_sdk_dynamodb::operation::query::QueryError;
use aws_sdk_dynamodb::types::AttributeValue;

use super::reminders::DynamoReminderStore;
use super::{dynamo_kind, item, n, s, SUBSCRIBER_INDEX};
use crate::aws::error::port_error;
use crate::clock::Timestamp;
use crate::domain::SubscriberId;
use crate::ports::reminders::OP_BY_SUBSCRIBER;
use crate::ports::{PortError, SubscriberCursor, SubscriberIndex, SubscriberPage};

impl SubscriberIndex for DynamoReminderStore {
    async fn by_subscriber(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SubscriberCursor>,
        limit: u32,
    ) -> Result<SubscriberPage, PortError> {
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(SUBSCRIBER_INDEX)
            .key_condition_expression("subscriber_id = :s")
            .expression_attribute_values(":s", s(subscriber.as_str()))
            .scan_index_forward(false)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX));
        if let Some(c) = after {
            q = q
                .exclusive_start_key("reminder_id", s(&c.reminder_id))
                .exclusive_start_key("subscriber_id", s(subscriber.as_str()))
                .exclusive_start_key("due_at", n(c.due_at.as_millis()));
        }
        let out = q
            .send()
            .await
            .map_err(|e| port_error(OP_BY_SUBSCRIBER, e, dynamo_kind!(QueryError)))?;
        let items = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(item::summary)
            .collect();
        let next = out.last_evaluated_key.as_ref().and_then(|k| {
            let (Some(AttributeValue::S(id)), Some(AttributeValue::N(due))) =
                (k.get("reminder_id"), k.get("due_at"))
            else {
                return None;
            };
            Some(SubscriberCursor {
                due_at: Timestamp::from_millis(due.parse().ok()?),
                reminder_id: id.clone(),
            })
        });
        Ok(SubscriberPage { items, next })
    }
}
