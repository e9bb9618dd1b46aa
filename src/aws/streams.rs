//! The ledger's DynamoDB stream as a [`LedgerStream`], for the local player (on AWS,
//! Lambda's event source mapping reads it): DescribeStream for the shards, GetShardIterator
//! and GetRecords for a shard's records after a checkpoint, each converted to the same
//! `EventRecord` the `events` function receives.

use std::collections::HashMap;

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodbstreams::operation::describe_stream::DescribeStreamError;
use aws_sdk_dynamodbstreams::operation::get_records::GetRecordsError;
use aws_sdk_dynamodbstreams::operation::get_shard_iterator::GetShardIteratorError;
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, ShardIteratorType};
use aws_sdk_dynamodbstreams::Client;

use super::error::{port_error, Kind};
use crate::ports::events::{LedgerStream, OP_READ};
use crate::ports::PortError;

/// Empty pages read before a shard counts as caught up (a shard can answer empty pages
/// before its records).
const EMPTY_PAGES: u32 = 3;

#[derive(Debug, Clone)]
pub struct DynamoStream {
    client: Client,
    arn: String,
}

impl DynamoStream {
    pub fn new(client: Client, arn: impl Into<String>) -> Self {
        Self {
            client,
            arn: arn.into(),
        }
    }

    /// The stream of `table` (its latest), or `None` when the table has none enabled.
    pub async fn of_table(
        dynamo: &aws_sdk_dynamodb::Client,
        client: Client,
        table: &str,
    ) -> Result<Option<Self>, PortError> {
        let out = dynamo
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| port_error(OP_READ, e, |_| Kind::Refused))?;
        let arn = out.table.and_then(|t| t.latest_stream_arn);
        Ok(arn.map(|arn| Self::new(client, arn)))
    }

    async fn iterator(
        &self,
        shard: &str,
        after: Option<&str>,
    ) -> Result<Option<String>, PortError> {
        let kind = match after {
            Some(_) => ShardIteratorType::AfterSequenceNumber,
            None => ShardIteratorType::TrimHorizon,
        };
        let out = self
            .client
            .get_shard_iterator()
            .stream_arn(&self.arn)
            .shard_id(shard)
            .shard_iterator_type(kind)
            .set_sequence_number(after.map(str::to_owned))
            .send()
            .await
            .map_err(|e| port_error(OP_READ, e, iterator_kind))?;
        Ok(out.shard_iterator)
    }
}

fn iterator_kind(e: &GetShardIteratorError) -> Kind {
    match e {
        GetShardIteratorError::ResourceNotFoundException(_)
        | GetShardIteratorError::TrimmedDataAccessException(_) => Kind::Refused,
        _ => Kind::Unavailable,
    }
}

fn records_kind(e: &GetRecordsError) -> Kind {
    match e {
        GetRecordsError::LimitExceededException(_) => Kind::Throttled,
        GetRecordsError::ResourceNotFoundException(_)
        | GetRecordsError::TrimmedDataAccessException(_) => Kind::Refused,
        _ => Kind::Unavailable,
    }
}

impl LedgerStream for DynamoStream {
    fn id(&self) -> &str {
        &self.arn
    }

    async fn shards(&self) -> Result<Vec<String>, PortError> {
        let mut shards = Vec::new();
        let mut start: Option<String> = None;
        loop {
            let out = self
                .client
                .describe_stream()
                .stream_arn(&self.arn)
                .set_exclusive_start_shard_id(start.take())
                .send()
                .await
                .map_err(|e| {
                    port_error(OP_READ, e, |e| match e {
                        DescribeStreamError::ResourceNotFoundException(_) => Kind::Refused,
                        _ => Kind::Unavailable,
                    })
                })?;
            let Some(description) = out.stream_description else {
                break;
            };
            for s in description.shards.unwrap_or_default() {
                shards.push((s.shard_id.unwrap_or_default(), s.parent_shard_id));
            }
            match description.last_evaluated_shard_id {
                Some(last) => start = Some(last),
                None => break,
            }
        }
        Ok(parents_first(shards))
    }

    async fn read(
        &self,
        shard: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<EventRecord>, PortError> {
        let mut iterator = self.iterator(shard, after).await?;
        for _ in 0..EMPTY_PAGES {
            let Some(it) = iterator.take() else { break };
            let out = self
                .client
                .get_records()
                .shard_iterator(it)
                .limit(limit.clamp(1, 1000) as i32)
                .send()
                .await
                .map_err(|e| port_error(OP_READ, e, records_kind))?;
            let records = out.records.unwrap_or_default();
            if !records.is_empty() {
                return Ok(records
                    .into_iter()
                    .map(|r| event_record(&self.arn, r))
                    .collect());
            }
            iterator = out.next_shard_iterator;
        }
        Ok(Vec::new())
    }
}

/// Shards ordered so that a parent comes before its children (a child's records are newer).
/// A parent no longer listed (trimmed) does not hold its children back.
fn parents_first(mut left: Vec<(String, Option<String>)>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    while !left.is_empty() {
        let listed: Vec<String> = left.iter().map(|(id, _)| id.clone()).collect();
        let (ready, wait): (Vec<_>, Vec<_>) = left
            .into_iter()
            .partition(|(_, parent)| parent.as_ref().is_none_or(|p| !listed.contains(p)));
        if ready.is_empty() {
            // Not possible on a real stream (no cycles); keep the rest in the order given.
            out.extend(wait.into_iter().map(|(id, _)| id));
            break;
        }
        out.extend(ready.into_iter().map(|(id, _)| id));
        left = wait;
    }
    out
}

/// A stream record as the `events` function receives it.
fn event_record(arn: &str, r: Record) -> EventRecord {
    let mut e = EventRecord::default();
    e.event_id = r.event_id.unwrap_or_default();
    e.event_name = r
        .event_name
        .map(|n| n.as_str().to_owned())
        .unwrap_or_default();
    e.event_source = r.event_source;
    e.event_version = r.event_version;
    e.event_source_arn = Some(arn.to_owned());
    e.aws_region = r.aws_region.unwrap_or_default();
    if let Some(change) = r.dynamodb {
        e.change.keys = item(change.keys);
        e.change.new_image = item(change.new_image);
        e.change.old_image = item(change.old_image);
        e.change.sequence_number = change.sequence_number;
        e.change.size_bytes = change.size_bytes.unwrap_or_default();
    }
    e
}

fn item(image: Option<HashMap<String, AttributeValue>>) -> serde_dynamo::Item {
    image
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, value(v)))
        .collect::<HashMap<_, _>>()
        .into()
}

/// The streams SDK's attribute value as serde_dynamo's. A type this SDK does not know
/// becomes NULL: the item then fails to decode, and the handler reports that record.
fn value(v: AttributeValue) -> serde_dynamo::AttributeValue {
    use serde_dynamo::AttributeValue as D;
    match v {
        AttributeValue::S(s) => D::S(s),
        AttributeValue::N(n) => D::N(n),
        AttributeValue::Bool(b) => D::Bool(b),
        AttributeValue::Null(n) => D::Null(n),
        AttributeValue::B(b) => D::B(b.into_inner()),
        AttributeValue::Ss(ss) => D::Ss(ss),
        AttributeValue::Ns(ns) => D::Ns(ns),
        AttributeValue::Bs(bs) => D::Bs(bs.into_iter().map(|b| b.into_inner()).collect()),
        AttributeValue::L(l) => D::L(l.into_iter().map(value).collect()),
        AttributeValue::M(m) => D::M(m.into_iter().map(|(k, v)| (k, value(v))).collect()),
        _ => D::Null(true),
    }
}
