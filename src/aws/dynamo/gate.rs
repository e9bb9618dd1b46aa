//! Provider gate items in the deliveries table, keyed `gate#<channel>#<partition>` (no
//! delivery key can contain `#`). Closing only ever extends: the write is conditional on the
//! stored time being earlier. The breaker's writes are each one conditional update, the same
//! rule as [`BreakerChange::apply`] (the contract tests hold the two together).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;

use super::ledger::KEY_ATTR;
use super::{dynamo_kind, n, s};
use crate::aws::error::{corrupt, port_error};
use crate::clock::Timestamp;
use crate::ports::gate::{
    BreakerChange, GateState, OpenBreaker, OP_BREAKER, OP_FAILED, OP_GET, OP_THROTTLE,
};
use crate::ports::{Gate, GatePartition, PortError};

/// Gate items outlive their last write by this much, then TTL removes them.
const GATE_RETENTION: Duration = Duration::from_secs(24 * 3600);

const THROTTLED_UNTIL: &str = "throttled_until";
const FAILURES: &str = "breaker_failures";
const OPENED_AT: &str = "breaker_opened_at";
const UNTIL: &str = "breaker_until";
const REOPENS: &str = "breaker_reopens";
const PROBE_UNTIL: &str = "breaker_probe_until";
const RUN_SINCE: &str = "breaker_run_since";

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

    /// One conditional update; a failed condition answers `false`.
    async fn update(
        &self,
        op: &'static str,
        p: &GatePartition,
        expression: &str,
        condition: Option<&str>,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<bool, PortError> {
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY_ATTR, s(p.item_key()))
            .update_expression(expression)
            .set_condition_expression(condition.map(str::to_owned));
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        match req.send().await {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(false)
            }
            Err(e) => Err(port_error(op, e, dynamo_kind!(UpdateItemError))),
        }
    }
}

fn ttl(from: Timestamp) -> AttributeValue {
    n(from.plus(GATE_RETENTION).as_epoch_seconds_ceil())
}

fn number(item: &HashMap<String, AttributeValue>, name: &str) -> Result<Option<i64>, PortError> {
    let Some(value) = item.get(name) else {
        return Ok(None);
    };
    value
        .as_n()
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
        .map(Some)
        .ok_or_else(|| corrupt(OP_GET, format!("{name} is not a number")))
}

fn decode(item: &HashMap<String, AttributeValue>) -> Result<GateState, PortError> {
    let at = |name| number(item, name).map(|v| v.map(Timestamp::from_millis));
    let breaker = match at(UNTIL)? {
        None => None,
        Some(until) => Some(OpenBreaker {
            opened_at: at(OPENED_AT)?.unwrap_or(until),
            until,
            reopens: number(item, REOPENS)?
                .unwrap_or(0)
                .clamp(0, i64::from(u32::MAX)) as u32,
            probe_until: at(PROBE_UNTIL)?,
        }),
    };
    Ok(GateState {
        throttled_until: at(THROTTLED_UNTIL)?,
        failures: number(item, FAILURES)?
            .unwrap_or(0)
            .clamp(0, i64::from(u32::MAX)) as u32,
        run_since: at(RUN_SINCE)?,
        breaker,
    })
}

impl Gate for DynamoGate {
    async fn state(&self, p: &GatePartition) -> Result<GateState, PortError> {
        // An eventually consistent read is enough for a gate, at half the cost: every breaker
        // write is conditional, so a stale copy can only lose a race, never break a rule.
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY_ATTR, s(p.item_key()))
            .projection_expression(
                [
                    THROTTLED_UNTIL,
                    FAILURES,
                    RUN_SINCE,
                    OPENED_AT,
                    UNTIL,
                    REOPENS,
                    PROBE_UNTIL,
                ]
                .join(", "),
            )
            .send()
            .await
            .map_err(|e| port_error(OP_GET, e, dynamo_kind!(GetItemError)))?;
        out.item.map_or(Ok(GateState::default()), |i| decode(&i))
    }

    async fn throttle(&self, p: &GatePartition, until: Timestamp) -> Result<(), PortError> {
        // A refused condition means someone closed it until later already: that stands.
        self.update(
            OP_THROTTLE,
            p,
            "SET throttled_until = :until, expires_at = :ttl",
            Some("attribute_not_exists(throttled_until) OR throttled_until < :until"),
            vec![(":until", n(until.as_millis())), (":ttl", ttl(until))],
        )
        .await
        .map(|_| ())
    }

    async fn failed(&self, p: &GatePartition, now: Timestamp) -> Result<GateState, PortError> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY_ATTR, s(p.item_key()))
            .update_expression(
                "SET expires_at = :ttl, breaker_run_since = if_not_exists(breaker_run_since, :now) \
                 ADD breaker_failures :one",
            )
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", n(now.as_millis()))
            .expression_attribute_values(":ttl", ttl(now))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| port_error(OP_FAILED, e, dynamo_kind!(UpdateItemError)))?;
        decode(&out.attributes.unwrap_or_default())
    }

    async fn breaker(&self, p: &GatePartition, change: BreakerChange) -> Result<bool, PortError> {
        let ms = |t: Timestamp| n(t.as_millis());
        let (expression, condition, values) = match change {
            BreakerChange::Open { now, until } => (
                "SET breaker_opened_at = :now, breaker_until = :until, breaker_reopens = :zero, \
                 expires_at = :ttl REMOVE breaker_probe_until",
                "attribute_not_exists(breaker_until)",
                vec![
                    (":now", ms(now)),
                    (":until", ms(until)),
                    (":zero", n(0)),
                    (":ttl", ttl(until)),
                ],
            ),
            BreakerChange::Probe { now, probe_until } => (
                "SET breaker_probe_until = :probe",
                "breaker_until <= :now AND (attribute_not_exists(breaker_probe_until) \
                 OR breaker_probe_until <= :now)",
                vec![(":now", ms(now)), (":probe", ms(probe_until))],
            ),
            BreakerChange::Reopen { probe_until, until } => (
                "SET breaker_until = :until, expires_at = :ttl ADD breaker_reopens :one \
                 REMOVE breaker_probe_until",
                "breaker_probe_until = :probe",
                vec![
                    (":probe", ms(probe_until)),
                    (":until", ms(until)),
                    (":one", n(1)),
                    (":ttl", ttl(until)),
                ],
            ),
            BreakerChange::Close => (
                "SET breaker_failures = :zero REMOVE breaker_until, breaker_opened_at, \
                 breaker_reopens, breaker_probe_until, breaker_run_since",
                "attribute_exists(breaker_until) OR breaker_failures > :zero",
                vec![(":zero", n(0))],
            ),
        };
        self.update(OP_BREAKER, p, expression, Some(condition), values)
            .await
    }
}
