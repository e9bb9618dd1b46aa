//! Provider gate items in the deliveries table, keyed `gate#<channel>#<partition>` (no
//! delivery key can contain `#`). Closing only ever extends: the write is conditional on the
//! stored time being earlier.

use std::time::Duration;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::Client;

use super::ledger::KEY_ATTR;
use super::{dynamo_kind, n, s};
use crate::aws::error::{corrupt, port_error};
use crate::clock::Timestamp;
use crate::ports::gate::{OP_GET, OP_THROTTLE};
use crate::ports::{Gate, GatePartition, PortError};

/// Gate items outlive their closing by this much, then TTL removes them.
const GATE_RETENTION: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone)]
pub struct DynamoGate {
    client: Client,
    table: String,
}

impl DynamoGate {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }
}

impl Gate for DynamoGate {
    async fn throttled_until(&self, p: &GatePartition) -> Result<Option<Timestamp>, PortError> {
        // An eventually consistent read is enough for a gate, at half the cost.
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY_ATTR, s(p.item_key()))
            .projection_expression("throttled_until")
            .send()
            .await
            .map_err(|e| port_error(OP_GET, e, dynamo_kind!(GetItemError)))?;
        let Some(value) = out.item.and_then(|mut i| i.remove("throttled_until")) else {
            return Ok(None);
        };
        let ms = value
            .as_n()
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
            .ok_or_else(|| corrupt(OP_GET, "throttled_until is not a number"))?;
        Ok(Some(Timestamp::from_millis(ms)))
    }

    async fn throttle(&self, p: &GatePartition, until: Timestamp) -> Result<(), PortError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY_ATTR, s(p.item_key()))
            .update_expression("SET throttled_until = :until, expires_at = :ttl")
            .condition_expression(
                "attribute_not_exists(throttled_until) OR throttled_until < :until",
            )
            .expression_attribute_values(":until", n(until.as_millis()))
            .expression_attribute_values(
                ":ttl",
                n(until.plus(GATE_RETENTION).as_epoch_seconds_ceil()),
            )
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Someone closed it until later already: that stands.
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(())
            }
            Err(e) => Err(port_error(OP_THROTTLE, e, dynamo_kind!(UpdateItemError))),
        }
    }
}
