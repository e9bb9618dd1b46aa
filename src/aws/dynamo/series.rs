//! [`SeriesStore`] on the reminders table (docs/design.md, "Recurring series"). A series is one
//! item, keyed `series#{id}`: the series as JSON in `series`, and beside it what the conditions and
//! the indexes read. `version` and `made_through` fence the maker and an edit. While active it
//! carries `series_shard` and `make_at` (the sparse `series-index`, where the maker finds the
//! series due); a subscriber's series share the `subscriber-index` partition
//! `series#{subscriber}` (no reminder's subscriber id can hold a `#`), sorted by `starts_at`.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::query::QueryError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use serde::{Deserialize, Serialize};

use super::reminders::DynamoReminderStore;
use super::{dynamo_kind, n, s, SUBSCRIBER_INDEX};
use crate::aws::error::{corrupt, port_error};
use crate::clock::Timestamp;
use crate::domain::series::{Rule, Series, SeriesStatus};
use crate::domain::{
    due_shard, Channel, Content, Owner, Recipient, ReminderId, SeriesId, SubscriberId,
};
use crate::ports::series::{
    make_at, ExpectedSeries, SeriesCursor, SeriesCursorPage, SeriesPage, SeriesStore, Written,
    OP_GET_SERIES, OP_PUT_SERIES, OP_SERIES_DUE, OP_SERIES_OF,
};
use crate::ports::PortError;

/// The maker's index: `series_shard` HASH, `make_at` RANGE, only active series.
pub const SERIES_INDEX: &str = "series-index";
/// Partitions of the maker's index (a million series due in one minute spread over them).
pub const SERIES_SHARDS: u32 = 8;

fn key(id: &SeriesId) -> String {
    format!("series#{}", id.as_str())
}

fn listing(subscriber: &SubscriberId) -> String {
    format!("series#{}", subscriber.as_str())
}

/// The series as stored in its `series` attribute.
#[derive(Debug, Serialize, Deserialize)]
struct Doc {
    series_id: SeriesId,
    subscriber_id: SubscriberId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<Owner>,
    rule: String,
    zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    local_zone: Option<String>,
    starts_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    until: Option<i64>,
    fresh_for_secs: u64,
    content: Content,
    /// Channel wire name → address.
    recipients: BTreeMap<String, String>,
    status: SeriesStatus,
    version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    made_through: Option<i64>,
    #[serde(default)]
    made: Vec<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    detached: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owed_after: Option<i64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pending: bool,
    /// What a newer version wrote that this one does not know: written back as read.
    #[serde(flatten)]
    unknown: crate::domain::wire::Unknown,
}

fn encode(s: &Series) -> Result<HashMap<String, AttributeValue>, PortError> {
    let doc = Doc {
        series_id: s.series_id.clone(),
        subscriber_id: s.subscriber_id.clone(),
        owner: s.owner.clone(),
        rule: s.rule.as_text(),
        zone: s.zone.clone(),
        local_zone: s.local_zone.clone(),
        starts_at: s.starts_at.as_millis(),
        until: s.until.map(|t| t.as_millis()),
        fresh_for_secs: s.fresh_for.as_secs(),
        content: s.content.clone(),
        recipients: s
            .recipients
            .iter()
            .map(|(c, r)| (c.as_str().to_owned(), r.expose().to_owned()))
            .collect(),
        status: s.status,
        version: s.version,
        made_through: s.made_through.map(|t| t.as_millis()),
        made: s.made.iter().map(|t| t.as_millis()).collect(),
        detached: s.detached.iter().map(|t| t.as_millis()).collect(),
        owed_after: s.owed_after.map(|t| t.as_millis()),
        pending: s.pending,
        unknown: s.unknown.clone(),
    };
    let json = serde_json::to_string(&doc).map_err(|e| corrupt(OP_PUT_SERIES, e.to_string()))?;
    let mut item = HashMap::from([
        ("reminder_id".to_owned(), s_(key(&s.series_id))),
        ("kind".to_owned(), s_("series")),
        ("series".to_owned(), s_(json)),
        ("version".to_owned(), n(s.version)),
        ("subscriber_id".to_owned(), s_(listing(&s.subscriber_id))),
        ("due_at".to_owned(), n(s.starts_at.as_millis())),
    ]);
    if let Some(m) = s.made_through {
        item.insert("made_through".into(), n(m.as_millis()));
    }
    if let Some(at) = make_at(s) {
        item.insert("series_shard".into(), n(shard(&s.series_id)));
        item.insert("make_at".into(), n(at.as_millis()));
    }
    Ok(item)
}

fn s_(v: impl Into<String>) -> AttributeValue {
    s(v)
}

fn shard(id: &SeriesId) -> u32 {
    ReminderId::parse(id.as_str()).map_or(0, |r| due_shard(&r, SERIES_SHARDS))
}

fn decode(op: &'static str, item: &HashMap<String, AttributeValue>) -> Result<Series, PortError> {
    let Some(AttributeValue::S(json)) = item.get("series") else {
        return Err(corrupt(op, "series: missing"));
    };
    let d: Doc = serde_json::from_str(json)
        .map_err(|e| corrupt(op, crate::domain::reminder::redact(&format!("series: {e}"))))?;
    let rule = Rule::parse(&d.rule).map_err(|e| corrupt(op, format!("series.rule: {e}")))?;
    let mut recipients = BTreeMap::new();
    for (name, address) in d.recipients {
        let channel: Channel = name
            .parse()
            .map_err(|e| corrupt(op, format!("series.recipients.{name}: {e}")))?;
        let r = Recipient::parse(channel, &address)
            .map_err(|e| corrupt(op, format!("series.recipients.{channel}: {e}")))?;
        recipients.insert(channel, r);
    }
    Ok(Series {
        series_id: d.series_id,
        subscriber_id: d.subscriber_id,
        owner: d.owner,
        rule,
        zone: d.zone,
        local_zone: d.local_zone,
        starts_at: Timestamp::from_millis(d.starts_at),
        until: d.until.map(Timestamp::from_millis),
        fresh_for: Duration::from_secs(d.fresh_for_secs),
        content: d.content,
        recipients,
        status: d.status,
        version: d.version,
        made_through: d.made_through.map(Timestamp::from_millis),
        made: d.made.into_iter().map(Timestamp::from_millis).collect(),
        detached: d.detached.into_iter().map(Timestamp::from_millis).collect(),
        owed_after: d.owed_after.map(Timestamp::from_millis),
        unknown: d.unknown,
        pending: d.pending,
    })
}

impl SeriesStore for DynamoReminderStore {
    async fn get_series(&self, id: &SeriesId) -> Result<Option<Series>, PortError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("reminder_id", s(key(id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| port_error(OP_GET_SERIES, e, dynamo_kind!(GetItemError)))?;
        out.item
            .map(|item| decode(OP_GET_SERIES, &item))
            .transpose()
    }

    async fn put_series(
        &self,
        series: &Series,
        expected: ExpectedSeries,
    ) -> Result<Written, PortError> {
        let item = encode(series)?;
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        put = match expected {
            ExpectedSeries::Absent => put.condition_expression("attribute_not_exists(reminder_id)"),
            ExpectedSeries::At {
                version,
                made_through: Some(m),
            } => put
                .condition_expression("version = :v AND made_through = :m")
                .expression_attribute_values(":v", n(version))
                .expression_attribute_values(":m", n(m.as_millis())),
            ExpectedSeries::At {
                version,
                made_through: None,
            } => put
                .condition_expression("version = :v AND attribute_not_exists(made_through)")
                .expression_attribute_values(":v", n(version)),
        };
        match put.send().await {
            Ok(_) => Ok(Written::Written),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                let old = match e.into_err() {
                    PutItemError::ConditionalCheckFailedException(f) => f.item,
                    _ => None,
                };
                let current = old.map(|item| decode(OP_PUT_SERIES, &item)).transpose()?;
                Ok(Written::Conflict(current.map(Box::new)))
            }
            Err(e) => Err(port_error(OP_PUT_SERIES, e, dynamo_kind!(PutItemError))),
        }
    }

    async fn series_due(&self, until: Timestamp, limit: u32) -> Result<Vec<Series>, PortError> {
        let mut due: Vec<(Timestamp, Series)> = Vec::new();
        for shard in 0..SERIES_SHARDS {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(SERIES_INDEX)
                .key_condition_expression("series_shard = :s AND make_at <= :u")
                .expression_attribute_values(":s", n(shard))
                .expression_attribute_values(":u", n(until.as_millis()))
                .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
                .send()
                .await
                .map_err(|e| port_error(OP_SERIES_DUE, e, dynamo_kind!(QueryError)))?;
            for item in out.items.unwrap_or_default() {
                let at = match item.get("make_at") {
                    Some(AttributeValue::N(v)) => v.parse().map(Timestamp::from_millis).ok(),
                    _ => None,
                };
                // An item the maker cannot read is skipped (and logged), never blocks another.
                match decode(OP_SERIES_DUE, &item) {
                    Ok(series) => due.push((at.unwrap_or(until), series)),
                    Err(e) => tracing::warn!(error = %e, "series: unreadable item skipped"),
                }
            }
        }
        due.sort_by_key(|(at, _)| *at);
        due.truncate(limit as usize);
        Ok(due.into_iter().map(|(_, series)| series).collect())
    }

    async fn series_of(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesId>,
        limit: u32,
    ) -> Result<SeriesPage, PortError> {
        // The cursor names a series; its index key is read from the item itself (gone: the
        // list starts over, as the port says).
        let cursor = match after {
            Some(a) => self.get_series(a).await?.map(|cur| SeriesCursor {
                starts_at: cur.starts_at,
                series_id: a.clone(),
            }),
            None => None,
        };
        let page = self
            .series_after(subscriber, cursor.as_ref(), limit)
            .await?;
        Ok(SeriesPage {
            items: page.items,
            next: page.next.map(|c| c.series_id),
        })
    }

    async fn series_after(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesCursor>,
        limit: u32,
    ) -> Result<SeriesCursorPage, PortError> {
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(SUBSCRIBER_INDEX)
            .key_condition_expression("subscriber_id = :s")
            .expression_attribute_values(":s", s(listing(subscriber)))
            // One more than asked: the extra key is what tells whether another page exists.
            .limit(i32::try_from(limit.max(1).saturating_add(1)).unwrap_or(i32::MAX));
        if let Some(c) = after {
            // The index's key, from the cursor alone: no read of a series that may be gone.
            q = q
                .exclusive_start_key("reminder_id", s(key(&c.series_id)))
                .exclusive_start_key("subscriber_id", s(listing(subscriber)))
                .exclusive_start_key("due_at", n(c.starts_at.as_millis()));
        }
        let out = q
            .send()
            .await
            .map_err(|e| port_error(OP_SERIES_OF, e, dynamo_kind!(QueryError)))?;
        let mut keys: Vec<SeriesCursor> = out
            .items
            .unwrap_or_default()
            .iter()
            .filter_map(index_key)
            .collect();
        let wanted = limit.max(1) as usize;
        let truncated = keys.len() > wanted;
        keys.truncate(wanted);
        let mut items = Vec::new();
        for k in &keys {
            // The index lags the table: a key whose series is gone by now is passed over.
            if let Some(series) = self.get_series(&k.series_id).await? {
                items.push(series);
            }
        }
        // From the last key read, not the last series found: a page whose series are all
        // gone still leads on to the next. A page DynamoDB cut short goes on from where it
        // stopped reading, even past entries that did not parse.
        let next = if truncated {
            keys.pop()
        } else {
            match out.last_evaluated_key.as_ref() {
                Some(last) => index_key(last).or_else(|| keys.pop()),
                None => None,
            }
        };
        Ok(SeriesCursorPage { items, next })
    }
}

/// A subscriber-index entry of a series: its start (the index's sort key) and its id.
fn index_key(item: &HashMap<String, AttributeValue>) -> Option<SeriesCursor> {
    let id = match item.get("reminder_id") {
        Some(AttributeValue::S(k)) => SeriesId::parse(k.strip_prefix("series#")?).ok()?,
        _ => return None,
    };
    let starts_at = match item.get("due_at") {
        Some(AttributeValue::N(v)) => Timestamp::from_millis(v.parse().ok()?),
        _ => return None,
    };
    Some(SeriesCursor {
        starts_at,
        series_id: id,
    })
}
