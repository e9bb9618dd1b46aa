//! The ledger on DynamoDB: one item per delivery key, written whole by a conditional PutItem
//! that names the transition number, state and lease token it expects. A failed condition returns the
//! current item (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), so a conflict costs no read.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use aws_sdk_dynamodb::Client;
use serde_dynamo::aws_sdk_dynamodb_1::{from_item, to_item};

use super::{dynamo_kind, n, s};
use crate::aws::error::{corrupt, port_error};
use crate::domain::DeliveryKey;
use crate::ledger::DeliveryRecord;
use crate::ports::ledger::{OP_DELETE, OP_GET, OP_PUT};
use crate::ports::{Cas, Expected, Ledger, PortError};

/// Partition key of the deliveries table.
pub const KEY_ATTR: &str = "delivery_key";

#[derive(Debug, Clone)]
pub struct DynamoLedger {
    client: Client,
    table: String,
}

impl DynamoLedger {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }
}

/// The lease token's attribute (the record's field name).
const LEASE_ATTR: &str = "lease_token";

/// The condition of a write that expects a version ([`Expected::Version`]): its transition
/// number, its state and its lease token (or none), so that a retried write never lands on an
/// item re-created since under the same transition number.
fn fence_condition(leased: bool) -> &'static str {
    if leased {
        "#seq = :seq AND #status = :status AND #lease = :lease"
    } else {
        "#seq = :seq AND #status = :status AND attribute_not_exists(#lease)"
    }
}

fn is_condition_failure<R>(err: &SdkError<PutItemError, R>) -> bool {
    matches!(
        err.as_service_error(),
        Some(PutItemError::ConditionalCheckFailedException(_))
    )
}

impl Ledger for DynamoLedger {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY_ATTR, s(key.as_str()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| port_error(OP_GET, e, dynamo_kind!(GetItemError)))?;
        out.item
            .map(|item| from_item(item).map_err(|e| corrupt(OP_GET, e)))
            .transpose()
    }

    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        let item = to_item(record).map_err(|e| corrupt(OP_PUT, e))?;
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        put = match expected {
            Expected::Absent => put
                .condition_expression("attribute_not_exists(#k)")
                .expression_attribute_names("#k", KEY_ATTR),
            Expected::Version { seq, status, lease } => {
                let put = put
                    .condition_expression(fence_condition(lease.is_some()))
                    .expression_attribute_names("#seq", "seq")
                    .expression_attribute_names("#status", "status")
                    .expression_attribute_names("#lease", LEASE_ATTR)
                    .expression_attribute_values(":seq", n(seq))
                    .expression_attribute_values(":status", s(status.as_str()));
                match lease {
                    Some(t) => put.expression_attribute_values(":lease", s(t.as_str())),
                    None => put,
                }
            }
        };
        match put.send().await {
            Ok(_) => Ok(Cas::Applied),
            Err(err) if is_condition_failure(&err) => {
                let current = match err.into_service_error() {
                    PutItemError::ConditionalCheckFailedException(failed) => failed.item,
                    _ => None,
                };
                let current = current
                    .map(|item| from_item(item).map_err(|e| corrupt(OP_PUT, e)))
                    .transpose()?;
                Ok(Cas::Conflict(current.map(Box::new)))
            }
            Err(err) => Err(port_error(OP_PUT, err, dynamo_kind!(PutItemError))),
        }
    }

    async fn delete_if(&self, key: &DeliveryKey, expected: Expected) -> Result<Cas, PortError> {
        let Expected::Version { seq, status, lease } = expected else {
            return Err(PortError::Invariant {
                op: OP_DELETE,
                message: "a delete names the version it removes".into(),
            });
        };
        let mut delete = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(KEY_ATTR, s(key.as_str()))
            .condition_expression(fence_condition(lease.is_some()))
            .expression_attribute_names("#seq", "seq")
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#lease", LEASE_ATTR)
            .expression_attribute_values(":seq", n(seq))
            .expression_attribute_values(":status", s(status.as_str()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        if let Some(t) = lease {
            delete = delete.expression_attribute_values(":lease", s(t.as_str()));
        }
        let out = delete.send().await;
        match out {
            Ok(_) => Ok(Cas::Applied),
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(DeleteItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                let current = match err.into_service_error() {
                    DeleteItemError::ConditionalCheckFailedException(failed) => failed.item,
                    _ => None,
                };
                let current = current
                    .map(|item| from_item(item).map_err(|e| corrupt(OP_DELETE, e)))
                    .transpose()?;
                Ok(Cas::Conflict(current.map(Box::new)))
            }
            Err(err) => Err(port_error(OP_DELETE, err, dynamo_kind!(DeleteItemError))),
        }
    }
}
