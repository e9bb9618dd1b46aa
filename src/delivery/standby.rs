//! A channel in standby (DESIGN §12): the subscriber's fallback order holds it behind the
//! channel `ahead` of it that the reminder also lists. Whether its turn comes is read from the
//! ledger item of the channel ahead, never from the preferences alone, so a change of order
//! mid-flight cannot leave both channels waiting for each other, and a crash between a death
//! and its fallback's message loses nothing: the standby channel's own message finds the death.

use super::state::{DeliveryRecord, Status};
use crate::clock::Timestamp;
use crate::domain::Channel;

/// What a standby channel does, by the ledger item of the channel ahead of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// The channel ahead has not settled: look again after this time (its next eligible time
    /// when it waits for one, else now).
    Wait { after: Timestamp },
    /// The channel ahead died for a reason that hands the reminder on (to this channel, or
    /// naming none, as when this channel was added by an edit after the death): send.
    TakeOver,
    /// The channel ahead reached the person, expired, was cancelled, handed the reminder to
    /// another channel, or died for a reason that does not fall back: never sent.
    NotNeeded,
}

pub fn turn(ahead: Option<&DeliveryRecord>, channel: Channel, now: Timestamp) -> Turn {
    let Some(rec) = ahead else {
        return Turn::Wait { after: now };
    };
    match rec.status() {
        Status::Delivered | Status::Expired | Status::Cancelled => Turn::NotNeeded,
        Status::Dead => match (rec.fallback_to(), rec.dead_reason()) {
            (Some(to), _) if to == channel => Turn::TakeOver,
            (Some(_), _) => Turn::NotNeeded,
            (None, Some(reason)) if reason.falls_back() => Turn::TakeOver,
            (None, _) => Turn::NotNeeded,
        },
        Status::Scheduled | Status::Ready | Status::Sending | Status::Deferred => Turn::Wait {
            after: rec.next_eligible_at().map_or(now, |t| t.max(now)),
        },
    }
}
