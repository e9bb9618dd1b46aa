//! [`Eraser`] on the reminders table: conditional deletes, so an erasure never removes a
//! reminder that is still to be sent (it cancels first), and a key of another kind (a
//! preferences or suppression item under a reminder's delete) is never touched.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};

use super::reminders::{preferences_key, DynamoReminderStore};
use super::suppression::{suppression_key, KIND};
use super::{dynamo_kind, s};
use crate::aws::error::port_error;
use crate::domain::{AddressHash, ReminderId, ReminderStatus, SubscriberId};
use crate::ports::eraser::{OP_DELETE_PREFERENCES, OP_DELETE_REMINDER, OP_LIFT_SUPPRESSION};
use crate::ports::{Deleted, Eraser, PortError};

impl DynamoReminderStore {
    async fn delete_if(
        &self,
        op: &'static str,
        key: String,
        condition: &str,
        values: &[(&str, AttributeValue)],
    ) -> Result<Deleted, PortError> {
        let mut req = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("reminder_id", s(key))
            .condition_expression(condition)
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        if condition.contains("#status") {
            req = req.expression_attribute_names("#status", "status");
        }
        if condition.contains("#kind") {
            req = req.expression_attribute_names("#kind", "kind");
        }
        for (k, v) in values {
            req = req.expression_attribute_values(*k, v.clone());
        }
        match req.send().await {
            Ok(out) if out.attributes.is_some() => Ok(Deleted::Deleted),
            Ok(_) => Ok(Deleted::Missing),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), DeleteItemError::ConditionalCheckFailedException(_)) =>
            {
                // The item exists and fails the condition, or does not exist at all.
                Ok(match e.into_err() {
                    DeleteItemError::ConditionalCheckFailedException(c) if c.item.is_some() => {
                        Deleted::Pending
                    }
                    _ => Deleted::Missing,
                })
            }
            Err(e) => Err(port_error(op, e, dynamo_kind!(DeleteItemError))),
        }
    }
}

impl Eraser for DynamoReminderStore {
    async fn delete_reminder(&self, id: &ReminderId, force: bool) -> Result<Deleted, PortError> {
        // Only a reminder item (one with a subscriber), and unless forced one no longer
        // scheduled or enqueued.
        let (condition, values) = if force {
            ("attribute_exists(subscriber_id)", vec![])
        } else {
            (
                "attribute_exists(subscriber_id) AND NOT (#status IN (:scheduled, :enqueued))",
                vec![
                    (":scheduled", s(ReminderStatus::Scheduled.as_str())),
                    (":enqueued", s(ReminderStatus::Enqueued.as_str())),
                ],
            )
        };
        self.delete_if(
            OP_DELETE_REMINDER,
            id.as_str().to_owned(),
            condition,
            &values,
        )
        .await
    }

    async fn delete_preferences(&self, subscriber: &SubscriberId) -> Result<Deleted, PortError> {
        self.delete_if(
            OP_DELETE_PREFERENCES,
            preferences_key(subscriber),
            "attribute_exists(preferences)",
            &[],
        )
        .await
    }

    async fn delete_series(&self, id: &crate::domain::SeriesId) -> Result<Deleted, PortError> {
        self.delete_if(
            crate::ports::eraser::OP_DELETE_SERIES,
            format!("series#{}", id.as_str()),
            "attribute_exists(series)",
            &[],
        )
        .await
    }

    async fn lift_suppression(&self, address: &AddressHash) -> Result<Deleted, PortError> {
        self.delete_if(
            OP_LIFT_SUPPRESSION,
            suppression_key(address),
            "#kind = :kind",
            &[(":kind", s(KIND))],
        )
        .await
    }
}
