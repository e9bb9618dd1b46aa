//! The reminders table on DynamoDB (key `reminder_id`). A scheduled reminder carries
//! `due_shard`, which puts it in the sparse `due-index` (`due_shard` HASH, `due_at` RANGE);
//! every mark out of `scheduled` removes `due_shard` in the same conditional write.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::query::QueryError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use aws_sdk_dynamodb::Client;
use serde::{Deserialize, Serialize};
use serde_dynamo::aws_sdk_dynamodb_1::{from_item, to_item};

use super::{dynamo_kind, n, s, DUE_INDEX};
use crate::aws::error::{corrupt, port_error};
use crate::clock::Timestamp;
use crate::domain::{
    due_shard, Channel, Content, Recipient, Reminder, ReminderId, ReminderStatus, SubscriberId,
};
use crate::ports::reminders::{editable, OP_GET, OP_INSERT, OP_MARK, OP_QUERY, OP_REPLACE};
use crate::ports::{DueCursor, DuePage, DueReminder, Inserted, Marked, PortError, ReminderStore};

/// The item as stored; applications in other languages write the same shape (README).
#[derive(Debug, Serialize, Deserialize)]
struct ReminderItem {
    reminder_id: ReminderId,
    subscriber_id: SubscriberId,
    due_at: Timestamp,
    fresh_until: Timestamp,
    payload_version: u64,
    status: ReminderStatus,
    /// Projected into the index, so the scheduler needs no read of the item.
    channels: Vec<Channel>,
    /// Channel wire name → address.
    recipients: BTreeMap<String, String>,
    content: Content,
    expires_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    due_shard: Option<u32>,
}

/// The index projection: keys plus the INCLUDE attributes.
#[derive(Debug, Deserialize)]
struct DueItem {
    reminder_id: ReminderId,
    subscriber_id: SubscriberId,
    due_at: Timestamp,
    fresh_until: Timestamp,
    payload_version: u64,
    channels: Vec<Channel>,
}

impl ReminderItem {
    fn from_reminder(r: &Reminder, shards: u32) -> Self {
        Self {
            reminder_id: r.reminder_id.clone(),
            subscriber_id: r.subscriber_id.clone(),
            due_at: r.due_at,
            fresh_until: r.fresh_until,
            payload_version: r.payload_version,
            status: r.status,
            channels: r.channels().collect(),
            recipients: r
                .recipients
                .iter()
                .map(|(c, rec)| (c.as_str().to_owned(), rec.expose().to_owned()))
                .collect(),
            content: r.content.clone(),
            expires_at: r.expires_at,
            due_shard: (r.status == ReminderStatus::Scheduled)
                .then(|| due_shard(&r.reminder_id, shards)),
        }
    }

    fn into_reminder(self) -> Result<Reminder, String> {
        let mut recipients = BTreeMap::new();
        for (channel, address) in self.recipients {
            let channel: Channel = channel.parse().map_err(|e| format!("{e}"))?;
            let r = Recipient::parse(channel, &address).map_err(|e| format!("{channel}: {e}"))?;
            recipients.insert(channel, r);
        }
        Ok(Reminder {
            reminder_id: self.reminder_id,
            subscriber_id: self.subscriber_id,
            due_at: self.due_at,
            fresh_until: self.fresh_until,
            content: self.content,
            recipients,
            payload_version: self.payload_version,
            status: self.status,
            expires_at: self.expires_at,
        })
    }
}

#[derive(Debug, Clone)]
pub struct DynamoReminderStore {
    client: Client,
    table: String,
    shards: u32,
}

impl DynamoReminderStore {
    pub fn new(client: Client, table: impl Into<String>, shards: u32) -> Self {
        Self {
            client,
            table: table.into(),
            shards: shards.max(1),
        }
    }

    /// A conditional PutItem; `Ok(None)` when the condition failed, with the old item's
    /// existence in `Some(false/true)` form folded into [`Marked`] by the callers.
    async fn put_conditional(
        &self,
        op: &'static str,
        r: &Reminder,
        condition: &str,
        values: &[(&str, aws_sdk_dynamodb::types::AttributeValue)],
    ) -> Result<Result<(), bool>, PortError> {
        let item =
            to_item(ReminderItem::from_reminder(r, self.shards)).map_err(|e| corrupt(op, e))?;
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        for (k, v) in values {
            put = put.expression_attribute_values(*k, v.clone());
        }
        if condition.contains("#status") {
            put = put.expression_attribute_names("#status", "status");
        }
        match put.send().await {
            Ok(_) => Ok(Ok(())),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                let existed = match e.into_err() {
                    PutItemError::ConditionalCheckFailedException(f) => f.item.is_some(),
                    _ => false,
                };
                Ok(Err(existed))
            }
            Err(e) => Err(port_error(op, e, dynamo_kind!(PutItemError))),
        }
    }
}

impl ReminderStore for DynamoReminderStore {
    fn shards(&self) -> u32 {
        self.shards
    }

    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        let cond = "attribute_not_exists(reminder_id)";
        Ok(match self.put_conditional(OP_INSERT, r, cond, &[]).await? {
            Ok(()) => Inserted::Created,
            Err(_) => Inserted::AlreadyExists,
        })
    }

    async fn replace(&self, r: &Reminder, expected_version: u64) -> Result<Marked, PortError> {
        if !editable(r.status) {
            return Ok(Marked::Changed);
        }
        let cond = "payload_version = :expected AND #status = :status";
        let values = [
            (":expected", n(expected_version)),
            (":status", s(r.status.as_str())),
        ];
        Ok(
            match self.put_conditional(OP_REPLACE, r, cond, &values).await? {
                Ok(()) => Marked::Marked,
                Err(true) => Marked::Changed,
                Err(false) => Marked::Missing,
            },
        )
    }

    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("reminder_id", s(id.as_str()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| port_error(OP_GET, e, dynamo_kind!(GetItemError)))?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let item: ReminderItem = from_item(item).map_err(|e| corrupt(OP_GET, e))?;
        item.into_reminder()
            .map(Some)
            .map_err(|e| corrupt(OP_GET, e))
    }

    async fn query_due(
        &self,
        shard: u32,
        until: Timestamp,
        limit: u32,
        after: Option<&DueCursor>,
    ) -> Result<DuePage, PortError> {
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(DUE_INDEX)
            .key_condition_expression("due_shard = :shard AND due_at <= :until")
            .expression_attribute_values(":shard", n(shard))
            .expression_attribute_values(":until", n(until.as_millis()))
            .scan_index_forward(true)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX));
        if let Some(c) = after {
            q = q
                .exclusive_start_key("reminder_id", s(c.reminder_id.as_str()))
                .exclusive_start_key("due_shard", n(shard))
                .exclusive_start_key("due_at", n(c.due_at.as_millis()));
        }
        let out = q
            .send()
            .await
            .map_err(|e| port_error(OP_QUERY, e, dynamo_kind!(QueryError)))?;
        let mut items = Vec::new();
        for item in out.items.unwrap_or_default() {
            let d: DueItem = from_item(item).map_err(|e| corrupt(OP_QUERY, e))?;
            items.push(DueReminder {
                reminder_id: d.reminder_id,
                subscriber_id: d.subscriber_id,
                due_at: d.due_at,
                fresh_until: d.fresh_until,
                payload_version: d.payload_version,
                channels: d.channels,
            });
        }
        let next = match (out.last_evaluated_key.is_some(), items.last()) {
            (true, Some(last)) => Some(DueCursor {
                due_at: last.due_at,
                reminder_id: last.reminder_id.clone(),
            }),
            _ => None,
        };
        Ok(DuePage { items, next })
    }

    async fn mark(
        &self,
        id: &ReminderId,
        payload_version: u64,
        to: ReminderStatus,
    ) -> Result<Marked, PortError> {
        if to == ReminderStatus::Scheduled {
            // Nothing moves a reminder back into the index but an edit (`replace`).
            return Ok(Marked::Changed);
        }
        let mut up = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("reminder_id", s(id.as_str()))
            .update_expression("SET #status = :to REMOVE due_shard")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":to", s(to.as_str()))
            .expression_attribute_values(":scheduled", s(ReminderStatus::Scheduled.as_str()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        up = if to == ReminderStatus::Cancelled {
            up.condition_expression("#status IN (:scheduled, :enqueued)")
                .expression_attribute_values(":enqueued", s(ReminderStatus::Enqueued.as_str()))
        } else {
            up.condition_expression("#status = :scheduled AND payload_version = :v")
                .expression_attribute_values(":v", n(payload_version))
        };
        match up.send().await {
            Ok(_) => Ok(Marked::Marked),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(match e.into_err() {
                    UpdateItemError::ConditionalCheckFailedException(f) if f.item.is_some() => {
                        Marked::Changed
                    }
                    _ => Marked::Missing,
                })
            }
            Err(e) => Err(port_error(OP_MARK, e, dynamo_kind!(UpdateItemError))),
        }
    }
}
