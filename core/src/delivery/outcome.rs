//! What became of a reminder, from its channels' deliveries. A reminder's own `status` says only
//! whether the scheduler handed it on (`enqueued`); its outcome is what a reader asks: was it
//! delivered, on every channel that should have been, or not, and why. The API's reminder and
//! series answers and `remindctl remind show` all say it with [`outcome`].

use crate::clock::Timestamp;
use crate::delivery::standby::{self, Turn};
use crate::domain::{Channel, DeadReason, Preferences, Reminder, ReminderStatus};
use crate::ledger::{DeliveryRecord, Status};
use crate::ports::{Ledger, PortError, ReminderStore};

/// Where one listed channel's delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelState {
    /// The ledger's item: its status, its dead reason, and whether its death handed the
    /// reminder on to another channel.
    Ledger {
        status: Status,
        dead_reason: Option<DeadReason>,
        handed_on: bool,
    },
    /// No item yet (or its turn has come): still to be sent, unless the reminder ended first.
    NotBegun,
    /// Behind a listed channel of the subscriber's fallback order that has not settled.
    Standby,
    /// Behind a channel that settled without handing on: never to be sent.
    NotNeeded,
    /// A state this version cannot read (a newer version wrote it): counted as still open.
    Unknown,
}

/// What became of a reminder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReminderOutcome {
    /// A channel may still be sent.
    Pending,
    /// A channel reached the person, and none went stale or failed.
    Delivered,
    /// A channel reached the person, and another went stale or failed.
    PartlyDelivered,
    /// No channel reached the person, and one failed (an `ambiguous` death among them: it may
    /// have been sent, and that channel says so).
    Failed,
    /// No channel reached the person, and one went stale.
    Expired,
    /// No channel reached the person: the reminder, or every channel, was cancelled.
    Cancelled,
}

impl ReminderOutcome {
    pub const ALL: [ReminderOutcome; 6] = [
        ReminderOutcome::Pending,
        ReminderOutcome::Delivered,
        ReminderOutcome::PartlyDelivered,
        ReminderOutcome::Failed,
        ReminderOutcome::Expired,
        ReminderOutcome::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReminderOutcome::Pending => "pending",
            ReminderOutcome::Delivered => "delivered",
            ReminderOutcome::PartlyDelivered => "partly_delivered",
            ReminderOutcome::Failed => "failed",
            ReminderOutcome::Expired => "expired",
            ReminderOutcome::Cancelled => "cancelled",
        }
    }
}

/// How one channel ended, for the outcome.
#[derive(PartialEq)]
enum End {
    Pending,
    Reached,
    Stale,
    Failed,
    Cancelled,
    /// Set aside by the subscriber's choice or the fallback order: not needed, handed on,
    /// opted out.
    Aside,
}

/// One channel's end: reached (delivered); stale (expired, dead because quiet hours outlasted
/// its freshness, or never begun because the reminder expired); failed (any other death that
/// did not hand the reminder on, or never begun because the reminder was quarantined);
/// cancelled; set aside (not needed, handed on, opted out); or still pending.
fn end(status: ReminderStatus, channel: &ChannelState) -> End {
    let never_begun = match status {
        ReminderStatus::Expired => End::Stale,
        ReminderStatus::Invalid => End::Failed,
        _ => End::Pending,
    };
    match *channel {
        ChannelState::Ledger {
            status: Status::Delivered,
            ..
        } => End::Reached,
        ChannelState::Ledger {
            status: Status::Expired,
            ..
        } => End::Stale,
        ChannelState::Ledger {
            status: Status::Cancelled,
            ..
        } => End::Cancelled,
        ChannelState::Ledger {
            status: Status::Dead,
            dead_reason,
            handed_on,
        } => match dead_reason {
            _ if handed_on => End::Aside,
            Some(DeadReason::ExpiredQuietHours) => End::Stale,
            Some(DeadReason::OptedOut) => End::Aside,
            _ => End::Failed,
        },
        ChannelState::NotNeeded => End::Aside,
        ChannelState::Ledger {
            status: Status::Scheduled,
            ..
        }
        | ChannelState::NotBegun
        | ChannelState::Standby => never_begun,
        // On its way (ready, sending, deferred), or a state a newer version wrote.
        ChannelState::Ledger { .. } | ChannelState::Unknown => End::Pending,
    }
}

/// What became of a reminder of `status` whose listed channels stand as `channels`: `pending`
/// while any channel may still be sent; then `delivered` when one was reached and none went
/// stale or failed; `partly_delivered` when one was reached and another went stale or failed;
/// `cancelled` when none was reached and the reminder, or every channel, was cancelled;
/// `failed` when one failed; `expired` when one went stale; else (every channel set aside)
/// `cancelled` if any channel was, `failed` otherwise. A redrive of a dead delivery may still
/// change it.
pub fn outcome(status: ReminderStatus, channels: &[ChannelState]) -> ReminderOutcome {
    let ends: Vec<End> = channels.iter().map(|c| end(status, c)).collect();
    let any = |e: End| ends.contains(&e);
    if any(End::Pending) {
        ReminderOutcome::Pending
    } else if any(End::Reached) {
        match any(End::Stale) || any(End::Failed) {
            true => ReminderOutcome::PartlyDelivered,
            false => ReminderOutcome::Delivered,
        }
    } else if status == ReminderStatus::Cancelled
        || (!ends.is_empty() && ends.iter().all(|e| *e == End::Cancelled))
    {
        ReminderOutcome::Cancelled
    } else if any(End::Failed) {
        ReminderOutcome::Failed
    } else if any(End::Stale) {
        ReminderOutcome::Expired
    } else if any(End::Cancelled) {
        ReminderOutcome::Cancelled
    } else {
        ReminderOutcome::Failed
    }
}

/// The subscriber's preferences, where a fallback order may hold a channel back: not read for a
/// reminder that lists one channel and was never edited (no other channel of it ever had a
/// delivery), as the consumer reads them. Once edited, a channel it listed before may have
/// reached the person, and the one left is not needed (docs/design.md, "Fallback chain").
pub async fn fallback_prefs<S: ReminderStore>(
    store: &S,
    r: &Reminder,
) -> Result<Option<Preferences>, PortError> {
    if r.recipients.len() < 2 && r.payload_version <= 1 {
        return Ok(None);
    }
    store.preferences(&r.subscriber_id).await
}

/// The fallback order's turn for `channel` of `r` while it has no item or a scheduled one (the
/// chain on the ledger, as the consumer reads it); `None` when no order holds it.
pub async fn held<L: Ledger>(
    ledger: &L,
    prefs: Option<&Preferences>,
    r: &Reminder,
    channel: Channel,
    record: Option<&DeliveryRecord>,
    now: Timestamp,
) -> Result<Option<Turn>, PortError> {
    let Some(prefs) = prefs else {
        return Ok(None);
    };
    if record.is_some_and(|rec| rec.status() != Status::Scheduled) {
        return Ok(None);
    }
    let listed = |c: Channel| r.recipients.contains_key(&c);
    let (rid, sid) = (&r.reminder_id, &r.subscriber_id);
    standby::turn(ledger, prefs, rid, sid, listed, channel, now).await
}

impl ChannelState {
    /// A channel as read: its turn in the fallback order when [`held`] gave one (waiting: in
    /// standby; not needed), else its ledger item, else not begun. `turn` is [`held`]'s answer,
    /// which is `None` for a channel whose item has left `scheduled`.
    pub fn of(record: Option<&DeliveryRecord>, turn: Option<Turn>) -> Self {
        match (record, turn) {
            (_, Some(Turn::Wait { .. })) => ChannelState::Standby,
            (_, Some(Turn::NotNeeded { .. })) => ChannelState::NotNeeded,
            (Some(rec), _) => ChannelState::Ledger {
                status: rec.status(),
                dead_reason: rec.dead_reason(),
                handed_on: rec.fallback_to().is_some(),
            },
            (None, Some(Turn::TakeOver { .. }) | None) => ChannelState::NotBegun,
        }
    }
}
