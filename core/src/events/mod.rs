//! Outcome events (docs/design.md, "Outcome events"): one EventBridge event for every ledger
//! transition into a settled state — `delivered`, `dead`, `expired`, `cancelled` — decided from the
//! ledger's DynamoDB stream, not from a worker's memory, so a crash between the ledger write and
//! the publish loses nothing (the stream record stays until the publisher succeeds).
//!
//! This module is the pure decision ([`settled`]) and the event's shape ([`Settled`]);
//! [`handler`] turns a batch of stream records into published events and a partial batch
//! response; [`player`] reads a stream locally the way Lambda's event source mapping does.
//! Events are delivered at least once: consumers deduplicate on `(delivery_key,
//! transition)`. An event never carries a recipient or content (the ledger holds neither).

use crate::domain::{Channel, DeadReason};
use crate::ledger::{DeliveryRecord, Status};

pub mod handler;
mod newer;
pub mod player;

pub use crate::ports::events::Settled;
pub use handler::{handle, Handled};

/// The event's `source`.
pub const SOURCE: &str = "reminders";
/// The event's `detail-type`.
pub const DETAIL_TYPE: &str = "Reminder Delivery Settled";
/// The `detail-type` of the event an erasure publishes (`reminders::erasure`): the counts of
/// what was removed, never an address or content.
pub const ERASED_DETAIL_TYPE: &str = "Subscriber Erased";
/// The detail's `version`: bumped when a field changes meaning or goes away.
pub const DETAIL_VERSION: u32 = 1;

/// A status an event is published for.
pub const fn is_settled(status: Status) -> bool {
    matches!(
        status,
        Status::Delivered | Status::Dead | Status::Expired | Status::Cancelled
    )
}

/// The event for one ledger write, from the item before (`None`: the write created it) and
/// after: an event only for a transition *into* a settled state. A write that leaves the
/// status as it was publishes nothing — the DLQ-copy bookkeeping on a dead item
/// (`dead → dead`), a TTL move on a settled one (`delivered → delivered`) — while a delivery
/// that settles again after a redrive (`dead → ready → … → delivered`) is a new transition
/// and publishes again.
///
/// Without the old image (a record whose old image could not be read), the new item's own
/// history entry for this transition says where it came from.
pub fn settled(old: Option<&DeliveryRecord>, new: &DeliveryRecord) -> Option<Settled> {
    let to = new.status();
    let from = match old {
        Some(old) => old.status(),
        None => entered_from(new),
    };
    // A status this version does not know (a newer writer's) may be a settlement it has
    // never heard of: published as written and marked, never dropped.
    if (to.is_known() && !is_settled(to)) || from == to {
        return None;
    }
    let reason = new
        .dead_reason()
        .filter(|_| to == Status::Dead || !to.is_known());
    let newer_values = [
        ("outcome", !to.is_known()),
        ("from", !from.is_known()),
        ("reason", matches!(reason, Some(DeadReason::Unknown(_)))),
    ]
    .into_iter()
    .filter_map(|(field, newer)| newer.then_some(field))
    .collect();
    let origin = new.origin();
    let occurrence = origin.and_then(|o| crate::domain::series::occurrence_of(&o.reminder_id));
    Some(Settled {
        version: DETAIL_VERSION,
        reminder_id: origin.map(|o| o.reminder_id.clone()),
        subscriber_id: origin.map(|o| o.subscriber_id.clone()),
        channel: origin.map(|o| o.channel.as_str()),
        delivery_key: new.key().clone(),
        outcome: to,
        reason,
        transition: new.seq(),
        from,
        at: new.updated_at(),
        attempts: new.attempt_count(),
        fallback_from: new.fallback_from().map(Channel::as_str),
        fallback_to: new.fallback_to().map(Channel::as_str),
        series_id: occurrence.as_ref().map(|(s, _)| s.clone()),
        occurrence_at: occurrence.map(|(_, at)| at),
        newer_values,
    })
}

/// The status the item's latest transition started from, by its own history.
fn entered_from(new: &DeliveryRecord) -> Status {
    new.history()
        .into_iter()
        .rev()
        .find(|(seq, _)| *seq == new.seq())
        .map_or(Status::Scheduled, |(_, h)| h.from)
}

#[cfg(test)]
mod tests;
