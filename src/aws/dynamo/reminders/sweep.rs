//! The sweep's scan of the due index: every entry, a page at a time, each with the key and
//! shard it is stored under (an entry the scheduler cannot read is quarantined by them).

use aws_sdk_dynamodb::operation::scan::ScanError;
use aws_sdk_dynamodb::types::AttributeValue;

use super::super::{dynamo_kind, item, n, s};
use super::DynamoReminderStore;
use crate::aws::error::port_error;
use crate::ports::reminders::{SweepCursor, SweepPage, SweptItem, OP_SWEEP};
use crate::ports::PortError;

impl DynamoReminderStore {
    /// A page of at most `limit` entries of the due index, after `after`.
    pub(super) async fn sweep(
        &self,
        after: Option<&SweepCursor>,
        limit: u32,
    ) -> Result<SweepPage, PortError> {
        let mut q = self
            .client
            .scan()
            .table_name(&self.table)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX));
        for (name, value, number) in after.map(|c| c.0.as_slice()).unwrap_or_default() {
            let v = if *number { n(value) } else { s(value) };
            q = q.exclusive_start_key(name, v);
        }
        let out = self
            .due_index
            .read(|index| q.clone().index_name(index).send())
            .await
            .map_err(|e| port_error(OP_SWEEP, e, dynamo_kind!(ScanError)))?;
        let items = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|raw| {
                let key = match raw.get("reminder_id") {
                    Some(AttributeValue::S(id)) => id.clone(),
                    _ => String::new(),
                };
                let shard = match raw.get("due_shard") {
                    Some(AttributeValue::N(v)) => v.parse().ok(),
                    _ => None,
                };
                SweptItem {
                    key,
                    shard,
                    entry: item::due_entry(raw),
                }
            })
            .collect();
        let next = out.last_evaluated_key.map(|k| {
            let mut attrs: Vec<(String, String, bool)> = k
                .into_iter()
                .filter_map(|(name, v)| match v {
                    AttributeValue::S(v) => Some((name, v, false)),
                    AttributeValue::N(v) => Some((name, v, true)),
                    _ => None,
                })
                .collect();
            attrs.sort();
            SweepCursor(attrs)
        });
        Ok(SweepPage { items, next })
    }
}
