//! The reminders table's `subscriber-index` (`subscriber_id` HASH, `due_at` RANGE), read
//! newest due first.

use aws_sdk_dynamodb::operation::query::QueryError;

use super::reminders::DynamoReminderStore;
use super::{dynamo_kind, item, n, s, SUBSCRIBER_INDEX};
use crate::aws::error::port_error;
use crate::domain::SubscriberId;
use crate::ports::reminders::OP_BY_SUBSCRIBER;
use crate::ports::{Listed, PortError, SubscriberCursor, SubscriberIndex, SubscriberPage};

fn cursor_of(item: &Listed) -> Option<SubscriberCursor> {
    match item {
        Listed::Summary(r) => Some(SubscriberCursor {
            due_at: r.due_at,
            reminder_id: r.reminder_id.as_str().to_owned(),
        }),
        Listed::Unreadable {
            reminder_id,
            due_at,
            ..
        } => due_at.map(|due_at| SubscriberCursor {
            due_at,
            reminder_id: reminder_id.clone(),
        }),
    }
}

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
            // One more than asked: DynamoDB names a last key when a page is exactly full, so
            // the extra item is what tells whether another page exists.
            .limit(i32::try_from(limit.max(1).saturating_add(1)).unwrap_or(i32::MAX));
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
        let mut items: Vec<Listed> = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(item::summary)
            .collect();
        let wanted = limit.max(1) as usize;
        let more = items.len() > wanted || out.last_evaluated_key.is_some();
        items.truncate(wanted);
        // The next page starts after the last item answered (its key from the item itself).
        let next = match (more, items.last()) {
            (true, Some(last)) => cursor_of(last),
            _ => None,
        };
        Ok(SubscriberPage { items, next })
    }
}
