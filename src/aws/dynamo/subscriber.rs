//! The reminders table's `subscriber-index` (`subscriber_id` HASH, `due_at` RANGE), read
//! newest due first.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemError;
use aws_sdk_dynamodb::operation::query::QueryError;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};

use super::reminders::DynamoReminderStore;
use super::{dynamo_kind, item, n, s, SUBSCRIBER_INDEX};
use crate::aws::error::port_error;
use crate::domain::{Owner, SubscriberId};
use crate::ports::reminders::OP_BY_SUBSCRIBER;
use crate::ports::{Listed, PortError, SubscriberCursor, SubscriberIndex, SubscriberPage};

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
            (true, Some(last)) => last.cursor(),
            _ => None,
        };
        self.fill_owners(&mut items).await?;
        Ok(SubscriberPage { items, next })
    }
}

/// Rounds of `UnprocessedKeys` the owners' read retries before it gives up (as throttled).
const OWNER_ROUNDS: usize = 4;

impl DynamoReminderStore {
    /// The page's owners, from the table in one `BatchGetItem` (the index does not project
    /// `owner`: a deployed index's projection cannot change in a stack update). Eventually
    /// consistent is enough: an owner never changes. A reminder gone from the table keeps no
    /// owner (its GET answers 404 anyway).
    async fn fill_owners(&self, items: &mut [Listed]) -> Result<(), PortError> {
        let ids: Vec<String> = items
            .iter()
            .filter_map(|i| match i {
                Listed::Summary(r) => Some(r.reminder_id.as_str().to_owned()),
                Listed::Unreadable { .. } => None,
            })
            .collect();
        let mut owners: HashMap<String, Result<Owner, String>> = HashMap::new();
        // BatchGetItem takes at most 100 keys; a page holds at most 100.
        for chunk in ids.chunks(100) {
            let mut pending = Some(
                KeysAndAttributes::builder()
                    .set_keys(Some(
                        chunk
                            .iter()
                            .map(|id| HashMap::from([("reminder_id".to_owned(), s(id))]))
                            .collect(),
                    ))
                    .projection_expression("reminder_id, #owner")
                    .expression_attribute_names("#owner", "owner")
                    .build()
                    .map_err(|e| PortError::Invariant {
                        op: OP_BY_SUBSCRIBER,
                        message: e.to_string(),
                    })?,
            );
            let mut rounds = 0;
            while let Some(keys) = pending.take() {
                rounds += 1;
                if rounds > OWNER_ROUNDS {
                    return Err(PortError::Throttled {
                        op: OP_BY_SUBSCRIBER,
                        message: "keys left unprocessed by every round of the owners' read".into(),
                    });
                }
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, keys.clone())
                    .send()
                    .await
                    .map_err(|e| {
                        port_error(OP_BY_SUBSCRIBER, e, dynamo_kind!(BatchGetItemError))
                    })?;
                for got in out
                    .responses
                    .and_then(|mut r| r.remove(&self.table))
                    .unwrap_or_default()
                {
                    let id = match got.get("reminder_id") {
                        Some(AttributeValue::S(id)) => id.clone(),
                        _ => continue,
                    };
                    let owner = match got.get("owner") {
                        None => continue,
                        Some(AttributeValue::S(o)) => {
                            Owner::parse(o.clone()).map_err(|e| e.to_string())
                        }
                        Some(_) => Err("owner: must be a string".to_owned()),
                    };
                    owners.insert(id, owner);
                }
                if let Some(rest) = out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)) {
                    if !rest.keys().is_empty() {
                        pending = Some(rest);
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
            }
        }
        for item in items.iter_mut() {
            let Listed::Summary(r) = item else { continue };
            match owners.remove(r.reminder_id.as_str()) {
                None => r.owner = None,
                Some(Ok(o)) => r.owner = Some(o),
                // An owner this version cannot read: shown as an unreadable item, which only
                // a caller reaching every reminder sees.
                Some(Err(reason)) => {
                    *item = Listed::Unreadable {
                        reminder_id: r.reminder_id.as_str().to_owned(),
                        due_at: Some(r.due_at),
                        reason,
                    }
                }
            }
        }
        Ok(())
    }
}
