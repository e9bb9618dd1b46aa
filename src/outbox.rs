//! The reminders table as applications use it: create, edit and cancel (DESIGN §1, §4).
//!
//! Creating and editing write only the reminders table; an edit bumps `payload_version`, so the
//! consumer sends the current version. An edit moves an enqueued reminder back into the due
//! index only when it adds a channel (the new channel is sent; the ledger keeps the others
//! single). Cancelling writes the ledger first — one conditional write per
//! delivery, which DynamoDB orders against claims — then flips the reminder's status.

use std::time::Duration;

use crate::clock::Timestamp;
use crate::delivery::state::Ctx;
use crate::delivery::{self, Cancelled};
use crate::domain::{
    Channel, Content, DeliveryKey, NewReminder, Recipient, Reminder, ReminderError, ReminderId,
    ReminderStatus,
};
use crate::ports::{Inserted, Ledger, Marked, PortError, ReminderStore};

#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error(transparent)]
    Invalid(#[from] ReminderError),
    #[error(transparent)]
    Port(#[from] PortError),
    #[error("the reminder kept changing under the edit; try again")]
    Contended,
}

pub use crate::domain::Retention;

pub async fn create<S: ReminderStore>(
    store: &S,
    new: NewReminder,
    default_freshness: Duration,
    retention: Retention,
) -> Result<Option<Reminder>, OutboxError> {
    let reminder = Reminder::new(new, default_freshness, retention.0)?;
    Ok(match store.insert(&reminder).await? {
        Inserted::Created => Some(reminder),
        Inserted::AlreadyExists => None,
    })
}

/// What an edit changes; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct Edit {
    pub due_at: Option<Timestamp>,
    pub fresh_until: Option<Timestamp>,
    pub content: Option<Content>,
    pub recipients: Option<Vec<Recipient>>,
}

// Returned once per edit, and the reminder is what the caller wants: boxing buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edited {
    Edited(Reminder),
    Missing,
    /// Cancelled or expired: no longer editable.
    Final(ReminderStatus),
}

pub async fn edit<S: ReminderStore>(
    store: &S,
    id: &ReminderId,
    changes: Edit,
    retention: Retention,
) -> Result<Edited, OutboxError> {
    for _ in 0..5 {
        let Some(current) = store.get(id).await? else {
            return Ok(Edited::Missing);
        };
        if !crate::ports::reminders::editable(current.status) {
            return Ok(Edited::Final(current.status));
        }
        let due_at = changes.due_at.unwrap_or(current.due_at);
        let new = NewReminder {
            reminder_id: current.reminder_id.clone(),
            subscriber_id: current.subscriber_id.clone(),
            due_at,
            fresh_until: Some(changes.fresh_until.unwrap_or(current.fresh_until)),
            content: changes.content.clone().unwrap_or(current.content.clone()),
            recipients: changes
                .recipients
                .clone()
                .unwrap_or_else(|| current.recipients.values().cloned().collect()),
        };
        let mut next = Reminder::new(new, Duration::ZERO, retention.0)?;
        next.payload_version = current.payload_version + 1;
        next.status = status_after_edit(&current, &next);
        let expected = (current.payload_version, current.status);
        match store.replace(&next, expected.0, expected.1).await? {
            Marked::Marked => return Ok(Edited::Edited(next)),
            Marked::Missing => return Ok(Edited::Missing),
            Marked::Changed => continue,
        }
    }
    Err(OutboxError::Contended)
}

/// An edit keeps the status, except that a channel added to an enqueued reminder puts it back
/// into scheduling: the scheduler enqueues every channel again, and the ledger keeps the ones
/// already sent (or in flight) single, so only the new channel is sent.
fn status_after_edit(current: &Reminder, next: &Reminder) -> ReminderStatus {
    let added = next
        .channels()
        .any(|c| !current.recipients.contains_key(&c));
    if current.status == ReminderStatus::Enqueued && added {
        ReminderStatus::Scheduled
    } else {
        current.status
    }
}

/// What a cancel did, per channel, and to the reminder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelReport {
    pub deliveries: Vec<(Channel, Cancelled)>,
    pub reminder: Marked,
}

pub async fn cancel<S: ReminderStore, L: Ledger>(
    store: &S,
    ledger: &L,
    id: &ReminderId,
    now: Timestamp,
    retention: Retention,
) -> Result<Option<CancelReport>, OutboxError> {
    let Some(reminder) = store.get(id).await? else {
        return Ok(None);
    };
    let mut deliveries = Vec::new();
    for channel in reminder.channels() {
        let ctx = Ctx {
            key: DeliveryKey::derive(&reminder.reminder_id, &reminder.subscriber_id, channel),
            now,
            expires_at: retention.expires_at(reminder.fresh_until),
        };
        deliveries.push((channel, delivery::cancel(ledger, &ctx).await?));
    }
    let marked = store
        .mark(id, reminder.payload_version, ReminderStatus::Cancelled)
        .await?;
    Ok(Some(CancelReport {
        deliveries,
        reminder: marked,
    }))
}
