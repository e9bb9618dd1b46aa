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
//! A delivery item whose new image cannot be decoded is logged at ERROR with the reason and
//! reported as a failure, like a failed publish: it may be a settlement, and skipping it
//! would lose that event without a trace. It cannot block the shard forever: the event
//! source mapping's `MaximumRetryAttempts` bounds the retries, `BisectBatchOnFunctionError`
//! isolates it from the good records after it, and its on-failure destination (the events
//! DLQ) gets the record's shard and sequence number, where an operator finds it.

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use serde_dynamo::AttributeValue;

use super::{settled, Settled};
use crate::delivery::state::DeliveryRecord;
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
}

/// What one record asks for.
enum Decision {
    Publish(Settled),
    Nothing,
    /// Its new image is not a ledger item (the reason is logged).
    Bad,
}

/// Publish the settled events of `records` (one stream batch, in shard order) on `bus`.
pub async fn handle<B: EventBus>(bus: &B, records: &[EventRecord]) -> Handled {
    let decisions: Vec<Decision> = records.iter().map(decide).collect();
    let first_bad = decisions.iter().position(|d| matches!(d, Decision::Bad));
    let usable = first_bad.unwrap_or(records.len());
    // The events before the first bad record, with the index of the record each came from.
    let (at, events): (Vec<usize>, Vec<Settled>) = decisions[..usable]
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match d {
            Decision::Publish(e) => Some((i, e.clone())),
            _ => None,
        })
        .unzip();
    let first_refused = match publish(bus, &events).await {
        Ok(refused) => refused.first().map(|r| at[r.index]),
        Err(()) => at.first().copied(),
    };
    let failed_from = [first_bad, first_refused].into_iter().flatten().min();
    let end = failed_from.unwrap_or(records.len());
    let published = at.iter().filter(|i| **i < end).count() as u32;
    let quiet = decisions[..end]
        .iter()
        .filter(|d| matches!(d, Decision::Nothing))
        .count() as u32;
    Handled {
        response: response(&records[end..]),
        failed_from,
        published,
        quiet,
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
    if record.event_name == "REMOVE" || key.starts_with(GATE_KEY_PREFIX) {
        return Decision::Nothing;
    }
    let seq = record.change.sequence_number.as_deref().unwrap_or_default();
    let new = decode(&record.change.new_image).and_then(|new| {
        new.ok_or_else(|| "no new image (the stream must be NEW_AND_OLD_IMAGES)".to_owned())
    });
    let new = match new {
        Ok(new) => new,
        Err(reason) => {
            tracing::error!(delivery_key = key, sequence_number = seq, %reason, "ledger item in the stream cannot be decoded; reported as failed");
            return Decision::Bad;
        }
    };
    // Without a readable old image, the new item's own history says where it came from.
    let old = decode(&record.change.old_image).unwrap_or_else(|reason| {
        tracing::warn!(delivery_key = key, sequence_number = seq, %reason, "old image cannot be decoded; deciding from the new item's history");
        None
    });
    match settled(old.as_ref(), &new) {
        Some(event) => Decision::Publish(event),
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
