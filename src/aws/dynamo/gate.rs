//! Provider gate items in the deliveries table, keyed `gate#<channel>#<partition>` (no
//! delivery key can contain `#`). Closing only ever extends: the write is conditional on the
//! stored time being earlier. The breaker's writes are each one conditional update, the same
//! rule as [`BreakerChange::apply`] (the contract tests hold the two together). No write
//! lowers the item's TTL (`DynamoGate::update`).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
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
const EXPIRES_AT: &str = "expires_at";

#[derive(Debug, Clone)]
pub struct DynamoGate {
    client: Client,
    table: String,
}

type Item = HashMap<String, AttributeValue>;

/// One update of a gate item: its `SET` clauses, the rest (`ADD`, `REMOVE`), its condition and
/// values, and the time the item must outlive (its TTL then `GATE_RETENTION` later).
struct Update<'a> {
    set: &'a [&'a str],
    rest: &'a str,
    condition: Option<&'a str>,
    values: Vec<(&'a str, AttributeValue)>,
    keep_until: Option<Timestamp>,
}

/// What DynamoDB answered: the item after the write, or the item that refused its condition.
enum Answer {
    Applied(Item),
    Refused(Option<Item>),
}

/// Whether the stored item is kept at least as long as `ttl` (seconds) asks already.
fn kept_as_long(item: &Item, ttl: &AttributeValue) -> bool {
    let secs = |v: &AttributeValue| v.as_n().ok().and_then(|n| n.parse::<i64>().ok());
    match (item.get(EXPIRES_AT).and_then(secs), secs(ttl)) {
        (Some(stored), Some(wanted)) => stored >= wanted,
        _ => false,
    }
}

impl DynamoGate {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// One conditional update whose TTL only ever grows: a throttle's `Retry-After` can keep
    /// the item far longer than a later breaker write would, and a lowered TTL would delete
    /// the closing while it holds. DynamoDB cannot take a maximum in an update, so the write
    /// is tried guarded by the stored TTL being lower; refused by that guard (the refused
    /// item says so), it is made again without touching the TTL. `None`: the change's own
    /// condition refused it.
    async fn update(
        &self,
        op: &'static str,
        p: &GatePartition,
        u: Update<'_>,
    ) -> Result<Option<Item>, PortError> {
        let Some(keep) = u.keep_until else {
            return self.send(op, p, &u, None).await.map(Answer::applied);
        };
        let wanted = ttl(keep);
        match self.send(op, p, &u, Some(&wanted)).await? {
            Answer::Applied(item) => Ok(Some(item)),
            Answer::Refused(Some(old)) if kept_as_long(&old, &wanted) => {
                self.send(op, p, &u, None).await.map(Answer::applied)
            }
            Answer::Refused(_) => Ok(None),
        }
    }

    async fn send(
        &self,
        op: &'static str,
        p: &GatePartition,
        u: &Update<'_>,
        ttl: Option<&AttributeValue>,
    ) -> Result<Answer, PortError> {
        let mut set = u.set.to_vec();
        let mut conditions: Vec<String> = u.condition.iter().map(|c| format!("({c})")).collect();
        if ttl.is_some() {
            set.push("expires_at = :ttl");
            conditions.push("(attribute_not_exists(expires_at) OR expires_at < :ttl)".into());
        }
        let mut expression = String::new();
        if !set.is_empty() {
            expression = format!("SET {} ", set.join(", "));
        }
        expression.push_str(u.rest);
        let condition = (!conditions.is_empty()).then(|| conditions.join(" AND "));
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY_ATTR, s(p.item_key()))
            .update_expression(expression.trim())
            .set_condition_expression(condition)
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        for (k, v) in &u.values {
            req = req.expression_attribute_values(*k, v.clone());
        }
        if let Some(ttl) = ttl {
            req = req.expression_attribute_values(":ttl", ttl.clone());
        }
        match req.send().await {
            Ok(out) => Ok(Answer::Applied(out.attributes.unwrap_or_default())),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(Answer::Refused(match e.into_err() {
                    UpdateItemError::ConditionalCheckFailedException(f) => f.item,
                    _ => None,
                }))
            }
            Err(e) => Err(port_error(op, e, dynamo_kind!(UpdateItemError))),
        }
    }
}

impl Answer {
    fn applied(self) -> Option<Item> {
        match self {
            Answer::Applied(item) => Some(item),
            Answer::Refused(_) => None,
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
        let u = Update {
            set: &["throttled_until = :until"],
            rest: "",
            condition: Some("attribute_not_exists(throttled_until) OR throttled_until < :until"),
            values: vec![(":until", n(until.as_millis()))],
            keep_until: Some(until),
        };
        self.update(OP_THROTTLE, p, u).await.map(|_| ())
    }

    async fn failed(&self, p: &GatePartition, now: Timestamp) -> Result<GateState, PortError> {
        let u = Update {
            set: &["breaker_run_since = if_not_exists(breaker_run_since, :now)"],
            rest: "ADD breaker_failures :one",
            condition: None,
            values: vec![(":one", n(1)), (":now", n(now.as_millis()))],
            keep_until: Some(now),
        };
        let item = self.update(OP_FAILED, p, u).await?;
        // Unconditional but for the TTL's guard, which the second try goes without.
        let item = item.ok_or_else(|| corrupt(OP_FAILED, "an unconditional count was refused"))?;
        decode(&item)
    }

    async fn breaker(&self, p: &GatePartition, change: BreakerChange) -> Result<bool, PortError> {
        let ms = |t: Timestamp| n(t.as_millis());
        let u = match change {
            BreakerChange::Open { now, until } => Update {
                set: &[
                    "breaker_opened_at = :now",
                    "breaker_until = :until",
                    "breaker_reopens = :zero",
                ],
                rest: "REMOVE breaker_probe_until",
                condition: Some("attribute_not_exists(breaker_until)"),
                values: vec![(":now", ms(now)), (":until", ms(until)), (":zero", n(0))],
                keep_until: Some(until),
            },
            BreakerChange::Probe {
                now,
                probe_until,
                reopens,
            } => Update {
                set: &["breaker_probe_until = :probe"],
                rest: "",
                // An item opened before the count was kept reads as none.
                condition: Some(if reopens == 0 {
                    "breaker_until <= :now AND (attribute_not_exists(breaker_probe_until) \
                     OR breaker_probe_until <= :now) AND (attribute_not_exists(breaker_reopens) \
                     OR breaker_reopens = :reopens)"
                } else {
                    "breaker_until <= :now AND (attribute_not_exists(breaker_probe_until) \
                     OR breaker_probe_until <= :now) AND breaker_reopens = :reopens"
                }),
                values: vec![
                    (":now", ms(now)),
                    (":probe", ms(probe_until)),
                    (":reopens", n(reopens)),
                ],
                keep_until: None,
            },
            BreakerChange::Reopen { probe_until, until } => Update {
                set: &["breaker_until = :until"],
                rest: "ADD breaker_reopens :one REMOVE breaker_probe_until",
                condition: Some("breaker_probe_until = :probe"),
                values: vec![
                    (":probe", ms(probe_until)),
                    (":until", ms(until)),
                    (":one", n(1)),
                ],
                keep_until: Some(until),
            },
            BreakerChange::Release { probe_until, until } => Update {
                set: &["breaker_until = :until"],
                rest: "REMOVE breaker_probe_until",
                condition: Some("breaker_probe_until = :probe"),
                values: vec![(":probe", ms(probe_until)), (":until", ms(until))],
                keep_until: Some(until),
            },
            BreakerChange::Close => Update {
                set: &["breaker_failures = :zero"],
                rest: "REMOVE breaker_until, breaker_opened_at, breaker_reopens, \
                       breaker_probe_until, breaker_run_since",
                condition: Some("attribute_exists(breaker_until) OR breaker_failures > :zero"),
                values: vec![(":zero", n(0))],
                keep_until: None,
            },
        };
        Ok(self.update(OP_BREAKER, p, u).await?.is_some())
    }
}
