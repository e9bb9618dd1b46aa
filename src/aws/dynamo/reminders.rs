//! The reminders table on DynamoDB (key `reminder_id`). A scheduled reminder carries
//! `due_shard`, which puts it in the sparse due indexes (`due_shard` HASH, `due_at` RANGE:
//! `due-recipients-index`, or `due-index` while that one is not readable, see `due_index`);
//! every mark out of `scheduled` removes `due_shard` in the same conditional write.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::query::QueryError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use aws_sdk_dynamodb::Client;
use serde_dynamo::aws_sdk_dynamodb_1::to_item;

use super::item::{self, ReminderItem};
use super::{dynamo_kind, n, s};
use crate::aws::error::{corrupt, port_error};
use crate::clock::Timestamp;
use crate::domain::{
    Preferences, Reminder, ReminderId, ReminderStatus, SubscriberId, MAX_DUE_SHARDS,
};
use crate::ports::reminders::{
    editable, FILTERED_PAGE, OP_EXTEND, OP_GET, OP_INSERT, OP_MARK, OP_QUARANTINE, OP_QUERY,
    OP_REPLACE,
};
use crate::ports::{
    DuePage, DueQuery, Inserted, Marked, PortError, ReminderStore, SweepCursor, SweepPage,
};
use expr::{cursor, marked, settled_values, skip_filter};

mod due_index;
mod expr;
mod preferences;
mod sweep;

pub(super) use preferences::decode_preferences;
pub use preferences::preferences_key;

/// Values of one `IN` list (DynamoDB's limit).
pub(super) const MAX_IN_LIST: usize = 100;
/// Subscribers the store filters out per query; past this the scheduler drops the rest itself.
pub(super) const MAX_SKIPPED: usize = 300;

#[derive(Debug, Clone)]
pub struct DynamoReminderStore {
    pub(super) client: Client,
    pub(super) table: String,
    shards: u32,
    due_index: due_index::DueIndexChoice,
}

impl DynamoReminderStore {
    pub fn new(client: Client, table: impl Into<String>, shards: u32) -> Self {
        Self {
            client,
            table: table.into(),
            shards: shards.max(1),
            due_index: due_index::DueIndexChoice::default(),
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
        if condition.contains("#owner") {
            put = put.expression_attribute_names("#owner", "owner");
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
    /// Every virtual shard: items written under any `DUE_SHARDS` are found, so changing it
    /// loses nothing (writes spread over `self.shards`).
    fn shards(&self) -> u32 {
        MAX_DUE_SHARDS
    }

    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        let cond = "attribute_not_exists(reminder_id)";
        Ok(match self.put_conditional(OP_INSERT, r, cond, &[]).await? {
            Ok(()) => Inserted::Created,
            Err(_) => Inserted::AlreadyExists,
        })
    }

    async fn replace(
        &self,
        r: &Reminder,
        expected_version: u64,
        expected_status: ReminderStatus,
    ) -> Result<Marked, PortError> {
        if !editable(r.status) || !editable(expected_status) {
            return Ok(Marked::Changed);
        }
        // The owner never changes: an edit lands only on the item of the owner it was made
        // for (a reminder removed by its TTL and created again by another caller keeps it).
        let mut values = vec![
            (":expected", n(expected_version)),
            (":status", s(expected_status.as_str())),
        ];
        let cond = match &r.owner {
            Some(owner) => {
                values.push((":owner", s(owner.as_str())));
                "payload_version = :expected AND #status = :status AND #owner = :owner"
            }
            None => {
                "payload_version = :expected AND #status = :status AND attribute_not_exists(#owner)"
            }
        };
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
        item::reminder(item)
            .map(Some)
            .map_err(|e| corrupt(OP_GET, e))
    }

    async fn query_due(&self, dq: &DueQuery<'_>) -> Result<DuePage, PortError> {
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("due_shard = :shard AND due_at <= :until")
            .expression_attribute_values(":shard", n(dq.shard))
            .expression_attribute_values(":until", n(dq.until.as_millis()))
            .scan_index_forward(true);
        // Limit counts the items DynamoDB evaluates, filtered out or not: a filtered page
        // evaluates more, so skipping a capped subscriber's backlog takes few requests, and
        // it may come back empty with a cursor (the scan reads on).
        let evaluated = match dq.skip.is_empty() {
            true => dq.limit.max(1),
            false => dq.limit.max(FILTERED_PAGE),
        };
        q = q.limit(i32::try_from(evaluated).unwrap_or(i32::MAX));
        if !dq.skip.is_empty() {
            let (filter, values) = skip_filter(dq.skip);
            q = q.filter_expression(filter);
            for (k, v) in values {
                q = q.expression_attribute_values(k, v);
            }
        }
        if let Some(c) = dq.after {
            q = q
                .exclusive_start_key("reminder_id", s(c.reminder_id.as_str()))
                .exclusive_start_key("due_shard", n(dq.shard))
                .exclusive_start_key("due_at", n(c.due_at.as_millis()));
        }
        let out = self
            .due_index
            .read(|index| q.clone().index_name(index).send())
            .await
            .map_err(|e| port_error(OP_QUERY, e, dynamo_kind!(QueryError)))?;
        let items = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(item::due_entry)
            .collect();
        let next = out.last_evaluated_key.as_ref().and_then(cursor);
        Ok(DuePage { items, next })
    }

    /// The due index scanned, a page at a time ([`DynamoReminderStore::sweep`]).
    async fn sweep_index(
        &self,
        after: Option<&SweepCursor>,
        limit: u32,
    ) -> Result<SweepPage, PortError> {
        self.sweep(after, limit).await
    }

    async fn extend_freshness(
        &self,
        id: &ReminderId,
        payload_version: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> Result<Marked, PortError> {
        let up = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("reminder_id", s(id.as_str()))
            .update_expression("SET fresh_until = :fresh, expires_at = :ttl")
            .condition_expression("payload_version = :v AND #status IN (:scheduled, :enqueued)")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":fresh", n(fresh_until.as_millis()))
            .expression_attribute_values(":ttl", n(expires_at))
            .expression_attribute_values(":v", n(payload_version))
            .expression_attribute_values(":scheduled", s(ReminderStatus::Scheduled.as_str()))
            .expression_attribute_values(":enqueued", s(ReminderStatus::Enqueued.as_str()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        marked(OP_EXTEND, up.send().await)
    }

    /// Only an item still in the index whose status is `scheduled`, missing or unknown
    /// becomes `invalid`. One that says `enqueued`, `cancelled`, `expired` or `invalid` but
    /// kept a stray `due_shard` (a writer's mistake) only leaves the index: its status, and
    /// the deliveries in flight for it, are left alone.
    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        let settled = "(:enqueued, :cancelled, :expired, :invalid)";
        let up = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("reminder_id", s(key))
            .update_expression("SET #status = :invalid, invalid_reason = :reason REMOVE due_shard")
            .condition_expression(format!(
                "attribute_exists(due_shard) AND NOT (#status IN {settled})"
            ))
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":reason", s(reason))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let up = settled_values(up);
        let old = match up.send().await {
            Ok(_) => return Ok(Marked::Marked),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                match e.into_err() {
                    UpdateItemError::ConditionalCheckFailedException(f) => f.item,
                    _ => None,
                }
            }
            Err(e) => return Err(port_error(OP_QUARANTINE, e, dynamo_kind!(UpdateItemError))),
        };
        let Some(old) = old else {
            return Ok(Marked::Missing);
        };
        if old.contains_key("due_shard") {
            self.unindex(key).await?;
        }
        Ok(Marked::Changed)
    }

    async fn preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> Result<Option<Preferences>, PortError> {
        self.read_preferences(subscriber).await
    }

    async fn recipient_rules(
        &self,
        subscriber: &SubscriberId,
        address: Option<&crate::domain::AddressHash>,
    ) -> Result<(Option<Preferences>, Option<crate::domain::Suppression>), PortError> {
        let Some(address) = address else {
            return Ok((self.preferences(subscriber).await?, None));
        };
        self.rules_batch(subscriber, address).await
    }

    async fn delivery_read(
        &self,
        id: &ReminderId,
        subscriber: &SubscriberId,
        address: Option<&crate::domain::AddressHash>,
    ) -> Result<crate::ports::reminders::DeliveryRead, PortError> {
        self.delivery_batch(id, subscriber, address).await
    }

    async fn put_preferences(
        &self,
        subscriber: &SubscriberId,
        prefs: &Preferences,
    ) -> Result<(), PortError> {
        self.write_preferences(subscriber, prefs).await
    }

    async fn suppression(
        &self,
        address: &crate::domain::AddressHash,
    ) -> Result<Option<crate::domain::Suppression>, PortError> {
        self.get_suppression(address).await
    }

    async fn put_suppression(&self, sup: &crate::domain::Suppression) -> Result<(), PortError> {
        self.insert_suppression(sup).await
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
        // An expiry keeps the item in the index until the ledger says `expired` too (the
        // scheduler then takes it out with `quarantine`): a run that stops between the two
        // leaves it for the next one, never half done.
        let update = match to {
            ReminderStatus::Expired => "SET #status = :to",
            _ => "SET #status = :to REMOVE due_shard",
        };
        let mut up = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("reminder_id", s(id.as_str()))
            .update_expression(update)
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":to", s(to.as_str()))
            .expression_attribute_values(":scheduled", s(ReminderStatus::Scheduled.as_str()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        // A cancel, or the consumer's expiry of an enqueued reminder found stale, also holds
        // for one already enqueued (out of the index: no `due_shard` to keep).
        up = if matches!(to, ReminderStatus::Cancelled | ReminderStatus::Expired) {
            up.condition_expression("#status IN (:scheduled, :enqueued) AND payload_version = :v")
                .expression_attribute_values(":enqueued", s(ReminderStatus::Enqueued.as_str()))
        } else {
            up.condition_expression("#status = :scheduled AND payload_version = :v")
        };
        up = up.expression_attribute_values(":v", n(payload_version));
        marked(OP_MARK, up.send().await)
    }
}
