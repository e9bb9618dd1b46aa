//! What the reminders table's calls share: the settled statuses' values, the filter that
//! skips subscribers, the paging cursor, a mark's answer, and taking a settled item out of the
//! index.

use std::collections::BTreeSet;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::AttributeValue;

use super::super::{dynamo_kind, s};
use super::{DynamoReminderStore, MAX_IN_LIST, MAX_SKIPPED};
use crate::aws::error::port_error;
use crate::clock::Timestamp;
use crate::domain::{ReminderStatus, SubscriberId};
use crate::ports::reminders::OP_QUARANTINE;
use crate::ports::{DueCursor, Marked, PortError};

impl DynamoReminderStore {
    /// Take a settled item out of the index, its status untouched.
    pub(super) async fn unindex(&self, key: &str) -> Result<(), PortError> {
        let up = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("reminder_id", s(key))
            .update_expression("REMOVE due_shard")
            .condition_expression("#status IN (:enqueued, :cancelled, :expired, :invalid)")
            .expression_attribute_names("#status", "status");
        match settled_values(up).send().await {
            Ok(_) => {
                tracing::warn!(
                    reminder_id = key,
                    "a settled reminder kept its due_shard; removed"
                );
                Ok(())
            }
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(())
            }
            Err(e) => Err(port_error(OP_QUARANTINE, e, dynamo_kind!(UpdateItemError))),
        }
    }
}

pub(super) fn settled_values(
    up: aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder,
) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
    up.expression_attribute_values(":enqueued", s(ReminderStatus::Enqueued.as_str()))
        .expression_attribute_values(":cancelled", s(ReminderStatus::Cancelled.as_str()))
        .expression_attribute_values(":expired", s(ReminderStatus::Expired.as_str()))
        .expression_attribute_values(":invalid", s(ReminderStatus::Invalid.as_str()))
}

/// `NOT (subscriber_id IN (…)) AND …`, in lists of at most 100 values.
pub(super) fn skip_filter(
    skip: &BTreeSet<SubscriberId>,
) -> (
    String,
    Vec<(String, aws_sdk_dynamodb::types::AttributeValue)>,
) {
    let ids: Vec<&SubscriberId> = skip.iter().take(MAX_SKIPPED).collect();
    let mut clauses = Vec::new();
    let mut values = Vec::new();
    for (c, chunk) in ids.chunks(MAX_IN_LIST).enumerate() {
        let names: Vec<String> = (0..chunk.len()).map(|i| format!(":skip{c}_{i}")).collect();
        for (name, id) in names.iter().zip(chunk) {
            values.push((name.clone(), s(id.as_str())));
        }
        clauses.push(format!("NOT (subscriber_id IN ({}))", names.join(", ")));
    }
    (clauses.join(" AND "), values)
}

/// Where a page ended, from DynamoDB's `LastEvaluatedKey`.
pub(super) fn cursor(
    key: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> Option<DueCursor> {
    let (Some(AttributeValue::S(id)), Some(AttributeValue::N(due))) =
        (key.get("reminder_id"), key.get("due_at"))
    else {
        return None;
    };
    let due_at = due.parse::<i64>().ok().map(Timestamp::from_millis)?;
    Some(DueCursor {
        due_at,
        reminder_id: id.clone(),
    })
}

/// A conditional `UpdateItem`'s answer as [`Marked`]: applied, refused against an item
/// (`ALL_OLD` returns it), or refused for want of one.
pub(super) fn marked<R>(
    op: &'static str,
    result: Result<R, SdkError<UpdateItemError, aws_smithy_runtime_api::http::Response>>,
) -> Result<Marked, PortError> {
    match result {
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
        Err(e) => Err(port_error(op, e, dynamo_kind!(UpdateItemError))),
    }
}
