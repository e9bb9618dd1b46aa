//! The `events` function's handler: a batch of the ledger's stream records in, the settled
//! events published, a partial batch response out.
//!
//! Order matters on a stream: Lambda resumes a shard from the first record reported, so once
//! a record fails, it and every later record of the batch are reported (the event source
//! mapping must enable `ReportBatchItemFailures`; without it a failure retries the whole
//! batch). A retried record may publish again: events are at least once, and consumers
//! deduplicate on `(delivery_key, transition)`.
//!
//! Records that publish nothing: REMOVE (the TTL deleting an item), provider gate items
//! (keys under `gate#`), and writes that settle nothing ([`super::settled`]).
//!
//! Values a newer writer added (a status, a dead reason, any enum of the item this version
//! does not know) are read into their unknown cases and published as written, the event's
//! `newer_values` naming them: a deploy never loses an event.
//!
//! A delivery item whose new image still cannot be decoded (a field missing or of the wrong
//! type: not a ledger item this version or a newer one writes, which add values and never
//! remove or retype a field) is quarantined in the log: an ERROR line with its key, sequence
//! number and reason, counted in [`Handled::unreadable`] (the batch's log line), and no event.
//! It never blocks the records after it: retrying cannot make any version read it, and failing
//! its record would hold every later event of the shard until the stream let it go (24 h).
//! The delivery's state stays on the ledger (`remind show`). Only a failed publish is retried,
//! for as long as the stream holds the record.

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use serde_dynamo::AttributeValue;

use super::{settled, Settled};
use crate::ledger::DeliveryRecord;
use crate::ports::events::EventBus;
use crate::ports::gate::GATE_KEY_PREFIX;

/// The ledger's key attribute, as the stream's `Keys` name it.
const KEY_ATTR: &str = "delivery_key";

/// What one batch came to.
#[derive(Debug, Clone, Default)]
pub struct Handled {
    /// The partial batch response: the first failed record and every one after it.
    pub response: DynamoDbEventResponse,
    /// Index of the first failed record (`None`: all succeeded).
    pub failed_from: Option<usize>,
    pub published: u32,
    /// Records that settle nothing (and were not after a failure).
    pub quiet: u32,
    /// Delivery items no version can read: logged and quarantined there (never retried).
    pub unreadable: u32,
    /// Events published with a value this version does not know (`newer_values`), each
    /// logged with a warning.
    pub newer: u32,
}

/// What one record asks for.
enum Decision {
    Publish(Box<Settled>),
    Nothing,
    /// Its new image is not a ledger item any version writes (the reason is logged).
    Unreadable,
}

/// Publish the settled events of `records` (one stream batch, in shard order) on `bus`.
pub async fn handle<B: EventBus>(bus: &B, records: &[EventRecord]) -> Handled {
    let decisions: Vec<Decision> = records.iter().map(decide).collect();
    // The events, with the index of the record each came from.
    let (at, events): (Vec<usize>, Vec<Settled>) = decisions
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match d {
            Decision::Publish(e) => Some((i, Settled::clone(e))),
            _ => None,
        })
        .unzip();
    let failed_from = match publish(bus, &events).await {
        Ok(refused) => refused.iter().map(|r| at[r.index]).min(),
        Err(()) => at.first().copied(),
    };
    let end = failed_from.unwrap_or(records.len());
    let published = at.iter().filter(|i| **i < end).count() as u32;
    let count =
        |want: fn(&Decision) -> bool| decisions[..end].iter().filter(|d| want(d)).count() as u32;
    Handled {
        response: response(&records[end..]),
        failed_from,
        published,
        quiet: count(|d| matches!(d, Decision::Nothing)),
        unreadable: count(|d| matches!(d, Decision::Unreadable)),
        newer: count(|d| matches!(d, Decision::Publish(e) if !e.newer_values.is_empty())),
    }
}

/// Publish, logging what failed; `Ok` lists the refused events.
async fn publish<B: EventBus>(
    bus: &B,
    events: &[Settled],
) -> Result<Vec<crate::ports::Rejected>, ()> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    match bus.publish(events).await {
        Ok(refused) => {
            for r in &refused {
                let e = &events[r.index];
                tracing::warn!(delivery_key = %e.delivery_key, transition = e.transition, code = %r.code, "event refused by the bus; retried from this record");
            }
            Ok(refused)
        }
        Err(e) => {
            tracing::warn!(error = %e, events = events.len(), "publishing failed; the batch is retried");
            Err(())
        }
    }
}

/// The partial batch response naming `failed` by sequence number.
fn response(failed: &[EventRecord]) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    response.batch_item_failures = failed
        .iter()
        .map(|r| {
            let mut f = DynamoDbBatchItemFailure::default();
            f.item_identifier = r.change.sequence_number.clone();
            f
        })
        .collect();
    response
}

fn decide(record: &EventRecord) -> Decision {
    let key = match record.change.keys.get(KEY_ATTR) {
        Some(AttributeValue::S(k)) => k.as_str(),
        _ => "",
    };
    // Delivery keys are `[A-Za-z0-9_-]`: a key with `#` is another kind of item sharing the
    // table (provider gates, `gate#…`), never a delivery.
    if record.event_name == "REMOVE" || key.starts_with(GATE_KEY_PREFIX) || key.contains('#') {
        return Decision::Nothing;
    }
    let seq = record.change.sequence_number.as_deref().unwrap_or_default();
    // A channel a newer version added is read through a stand-in, and published as written.
    let mut new_image = record.change.new_image.clone();
    let newer_channels = super::newer::stand_in(&mut new_image);
    let new = decode(&new_image).and_then(|new| {
        new.ok_or_else(|| "no new image (the stream must be NEW_AND_OLD_IMAGES)".to_owned())
    });
    let new = match new {
        Ok(new) => new,
        Err(reason) => {
            tracing::error!(delivery_key = key, sequence_number = seq, %reason, "ledger item in the stream cannot be decoded: no event for it (its state stays on the ledger); quarantined in this log line, never blocking the records after it");
            return Decision::Unreadable;
        }
    };
    // Without a readable old image, the new item's own history says where it came from.
    let mut old_image = record.change.old_image.clone();
    super::newer::stand_in(&mut old_image);
    let old = decode(&old_image).unwrap_or_else(|reason| {
        tracing::warn!(delivery_key = key, sequence_number = seq, %reason, "old image cannot be decoded; deciding from the new item's history");
        None
    });
    match settled(old.as_ref(), &new) {
        Some(mut event) => {
            super::newer::restore(&mut event, &newer_channels);
            if !event.newer_values.is_empty() {
                tracing::warn!(delivery_key = key, sequence_number = seq, transition = event.transition, outcome = event.outcome.as_str(), newer_values = ?event.newer_values, "values unknown to this version: published as written");
            }
            Decision::Publish(Box::new(event))
        }
        None => Decision::Nothing,
    }
}

/// A stream image as a ledger item (`None` when the record has none).
fn decode(image: &serde_dynamo::Item) -> Result<Option<DeliveryRecord>, String> {
    if image.is_empty() {
        return Ok(None);
    }
    serde_dynamo::from_item(image.clone())
        .map(Some)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
