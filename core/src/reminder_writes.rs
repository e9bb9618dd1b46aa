//! The reminders table as applications use it: create, edit and cancel (docs/design.md, "Reminders"
//! and "Cancelling").
//!
//! Creating and editing write only the reminders table; an edit bumps `payload_version`, so the
//! consumer sends the current version. An edit moves an enqueued reminder back into the due
//! index only when it adds a channel (the new channel is sent; the ledger keeps the others
//! single). Cancelling writes the ledger first — one conditional write per
//! delivery, which DynamoDB orders against claims — then flips the reminder's status.

use std::time::Duration;

use crate::clock::Timestamp;
use crate::delivery::{self, Cancelled};
use crate::domain::{
    Access, Channel, Content, DeliveryKey, NewReminder, Owner, Recipient, Reminder, ReminderError,
    ReminderId, ReminderStatus,
};
use crate::ledger::{Ctx, Origin, Status};
use crate::ports::{Inserted, Ledger, Marked, PortError, ReminderStore};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Invalid(#[from] ReminderError),
    #[error(transparent)]
    Port(#[from] PortError),
    #[error("the reminder kept changing under the edit; try again")]
    Contended,
}

pub use crate::domain::Retention;

/// How long after it is due a reminder created without a freshness stays fresh (the API and
/// `remindctl remind create`); unset, the retry policy's default.
pub const FRESHNESS_VAR: &str = "FRESHNESS_SECS";

/// `FRESHNESS_SECS`, or the retry policy's default freshness.
pub fn default_freshness() -> Result<Duration, crate::config::ConfigError> {
    let policy = crate::policy::RetryPolicy::default().freshness_default_secs;
    let secs = crate::config::Vars::env().u64_or(FRESHNESS_VAR, policy)?;
    // More than the clock margin, or nothing made with it could ever be sent.
    Ok(Duration::from_secs(secs.max(2)))
}

pub async fn create<S: ReminderStore>(
    store: &S,
    new: NewReminder,
    default_freshness: Duration,
    retention: Retention,
    now: Timestamp,
) -> Result<Option<Reminder>, WriteError> {
    create_owned(store, new, None, default_freshness, retention, now).await
}

/// [`create`], stored as `owner`'s (the API's caller): no other owner reaches it.
pub async fn create_owned<S: ReminderStore>(
    store: &S,
    new: NewReminder,
    owner: Option<Owner>,
    default_freshness: Duration,
    retention: Retention,
    now: Timestamp,
) -> Result<Option<Reminder>, WriteError> {
    let mut reminder = Reminder::new(new, default_freshness, retention.0)?;
    reminder.owner = owner;
    crate::domain::check_due_ahead(reminder.due_at, now)?;
    // Already stale by every clock: it could only expire. Refused, unless it exists (a repeat
    // of one created while it was fresh, its answer lost), which answers as any repeat.
    if stale_at(&reminder, now) {
        return match store.get(&reminder.reminder_id).await? {
            Some(_) => Ok(None),
            None => Err(ReminderError::StaleAlready.into()),
        };
    }
    Ok(match store.insert(&reminder).await? {
        Inserted::Created => Some(reminder),
        Inserted::AlreadyExists => None,
    })
}

/// Stale by every clock within the margin at `now`.
fn stale_at(r: &Reminder, now: Timestamp) -> bool {
    crate::domain::reminder::freshness(r.fresh_until, now)
        == crate::domain::reminder::Freshness::Stale
}

/// What an edit changes; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct Edit {
    pub due_at: Option<Timestamp>,
    pub fresh_until: Option<Timestamp>,
    pub content: Option<Content>,
    pub recipients: Option<Vec<Recipient>>,
    /// An occurrence of a series edited through its own id: from now on the series' edits
    /// leave it alone ([`Reminder::detached`]).
    pub detach: bool,
    /// A series' edit bringing its occurrences in line: the occurrence takes what the series
    /// now says even when that leaves it stale (it then expires). An application's edit of a
    /// fresh reminder that would leave it stale is refused instead.
    pub may_make_stale: bool,
}

// Returned once per edit, and the reminder is what the caller wants: boxing buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edited {
    Edited(Reminder),
    Missing,
    /// Cancelled or expired: no longer editable.
    Final(ReminderStatus),
    /// The edit lists again a channel an earlier edit removed after it was enqueued: its
    /// delivery was cancelled as edited away (or will be), and its key can never send again.
    /// Refused rather than acknowledged and silently never sent.
    Readded(Channel),
    /// Every channel it lists has settled (delivered, dead, expired or cancelled) and the
    /// edit adds none: it would send nothing (the API's `409`; create another reminder).
    NothingLeft,
}

pub async fn edit<S: ReminderStore, L: Ledger>(
    store: &S,
    ledger: &L,
    id: &ReminderId,
    changes: Edit,
    now: Timestamp,
    retention: Retention,
) -> Result<Edited, WriteError> {
    edit_as(&Access::Any, store, ledger, id, changes, now, retention).await
}

/// [`edit`] by a caller that reaches only some reminders: one it does not reach is
/// [`Edited::Missing`], and the write is conditional on the owner it read.
pub async fn edit_as<S: ReminderStore, L: Ledger>(
    access: &Access,
    store: &S,
    ledger: &L,
    id: &ReminderId,
    changes: Edit,
    now: Timestamp,
    retention: Retention,
) -> Result<Edited, WriteError> {
    for _ in 0..5 {
        let Some(current) = store.get(id).await? else {
            return Ok(Edited::Missing);
        };
        if !access.reaches(current.owner.as_ref(), &current.subscriber_id) {
            return Ok(Edited::Missing);
        }
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
        next.owner = current.owner.clone();
        next.detached = current.detached || changes.detach;
        next.unknown = current.unknown.clone();
        if next.due_at != current.due_at {
            crate::domain::check_due_ahead(next.due_at, now)?;
        }
        // An edit that would leave a fresh reminder stale could only make it expire: refused,
        // naming the freshness. (One already stale keeps the rules it had: an edit may revive
        // it, or change what a redrive would send.)
        if !changes.may_make_stale && stale_at(&next, now) && !stale_at(&current, now) {
            return Err(ReminderError::StaleAlready.into());
        }
        if let Some(channel) = readded(&current, &next) {
            return Ok(Edited::Readded(channel));
        }
        if let Some(channel) = edited_away(&current, &next, ledger).await? {
            return Ok(Edited::Readded(channel));
        }
        if nothing_left(&current, &next, ledger).await? {
            return Ok(Edited::NothingLeft);
        }
        next.payload_version = current.payload_version + 1;
        after_edit(&current, &mut next);
        // Before the edit lands: a settled delivery's proof outlives the edited reminder
        // (an edit that fails after this only kept the proof longer).
        if next.expires_at > current.expires_at {
            for channel in current
                .listed_channels()
                .chain(current.enqueued.iter().copied())
            {
                let ctx = Ctx {
                    key: DeliveryKey::derive(&current.reminder_id, &current.subscriber_id, channel),
                    now,
                    expires_at: next.expires_at,
                    origin: Some(origin(&current, channel)),
                };
                delivery::extend_horizon(ledger, &ctx).await?;
            }
        }
        let expected = (current.payload_version, current.status);
        match store.replace(&next, expected.0, expected.1).await? {
            Marked::Marked => return Ok(Edited::Edited(next)),
            Marked::Missing => return Ok(Edited::Missing),
            Marked::Changed => continue,
        }
    }
    Err(WriteError::Contended)
}

/// An enqueued reminder whose every listed channel has settled on the ledger, edited without
/// adding a channel: nothing it could change would ever be sent.
async fn nothing_left<L: Ledger>(
    current: &Reminder,
    next: &Reminder,
    ledger: &L,
) -> Result<bool, PortError> {
    if current.status != ReminderStatus::Enqueued
        || next
            .channels()
            .any(|c| !current.recipients.contains_key(&c))
    {
        return Ok(false);
    }
    for channel in current.listed_channels() {
        let key = DeliveryKey::derive(&current.reminder_id, &current.subscriber_id, channel);
        let settled = ledger.get(&key).await?.is_some_and(|r| {
            matches!(
                r.status(),
                Status::Delivered | Status::Dead | Status::Expired | Status::Cancelled
            )
        });
        if !settled {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A channel `next` lists that `current` does not, but that was enqueued before: an earlier
/// edit removed it after it went out, and its message ends it `cancelled` (edited away).
fn readded(current: &Reminder, next: &Reminder) -> Option<Channel> {
    let listed: Vec<Channel> = current.listed_channels().collect();
    next.listed_channels()
        .find(|c| !listed.contains(c) && current.enqueued.contains(c))
}

/// A channel `next` lists that `current` does not, whose delivery already ended cancelled: its
/// message went out before the scheduler recorded the enqueue (a crash between the two writes, a
/// lost answer), and met an edit that had taken the channel away. Its key can never send again,
/// as with [`readded`], though `current` never recorded it enqueued.
async fn edited_away<L: Ledger>(
    current: &Reminder,
    next: &Reminder,
    ledger: &L,
) -> Result<Option<Channel>, PortError> {
    let listed: Vec<Channel> = current.listed_channels().collect();
    for channel in next.listed_channels().filter(|c| !listed.contains(c)) {
        let key = DeliveryKey::derive(&current.reminder_id, &current.subscriber_id, channel);
        if ledger
            .get(&key)
            .await?
            .is_some_and(|r| r.status() == Status::Cancelled)
        {
            return Ok(Some(channel));
        }
    }
    Ok(None)
}

/// An edit keeps the status, except that a channel added to a reminder already enqueued puts
/// it back into scheduling, and the scheduler enqueues only the channels not enqueued before
/// (`Reminder::enqueued`): the others are never sent again, even once their ledger items are
/// gone. An edit that leaves nothing new to enqueue keeps it (or puts it back) enqueued.
fn after_edit(current: &Reminder, next: &mut Reminder) {
    let mut enqueued = current.enqueued.clone();
    if current.status == ReminderStatus::Enqueued {
        enqueued.extend(current.listed_channels());
    }
    let pending = next.listed_channels().any(|c| !enqueued.contains(&c));
    next.status = match current.status {
        ReminderStatus::Enqueued | ReminderStatus::Scheduled if !enqueued.is_empty() => {
            if pending {
                ReminderStatus::Scheduled
            } else {
                ReminderStatus::Enqueued
            }
        }
        status => status,
    };
    next.enqueued = enqueued;
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
) -> Result<Option<CancelReport>, WriteError> {
    cancel_as(&Access::Any, store, ledger, id, now, retention).await
}

/// [`cancel`] by a caller that reaches only some reminders: one it does not reach is `None`
/// (as if missing), and nothing is written. Owners never change, so the mark's condition on
/// the version read holds the owner too.
pub async fn cancel_as<S: ReminderStore, L: Ledger>(
    access: &Access,
    store: &S,
    ledger: &L,
    id: &ReminderId,
    now: Timestamp,
    retention: Retention,
) -> Result<Option<CancelReport>, WriteError> {
    let mut deliveries: Vec<(Channel, Cancelled)> = Vec::new();
    // The mark is conditional on the version read: an edit that lands between the ledger's
    // writes and the mark (a channel added, say) makes it fail, and the next round covers
    // the channels it added before marking again.
    for _ in 0..5 {
        let Some(reminder) = store.get(id).await? else {
            return Ok((!deliveries.is_empty()).then_some(CancelReport {
                deliveries,
                reminder: Marked::Missing,
            }));
        };
        if !access.reaches(reminder.owner.as_ref(), &reminder.subscriber_id) {
            return Ok(None);
        }
        for channel in reminder.listed_channels() {
            if deliveries.iter().any(|(c, _)| *c == channel) {
                continue;
            }
            let ctx = Ctx {
                key: DeliveryKey::derive(&reminder.reminder_id, &reminder.subscriber_id, channel),
                now,
                expires_at: retention.expires_at(reminder.fresh_until),
                origin: Some(origin(&reminder, channel)),
            };
            // A reminder that expired unsent: its deliveries expired, not cancelled (the
            // scheduler wrote that already, unless it expired before the ledger recorded it).
            let answer = match reminder.status {
                ReminderStatus::Expired => match delivery::expire_unsent(ledger, &ctx).await? {
                    delivery::Written::Applied(_) => Cancelled::AlreadyFinal(Status::Expired),
                    refused => delivery::cancel_answer(refused),
                },
                _ => delivery::cancel(ledger, &ctx).await?,
            };
            deliveries.push((channel, answer));
        }
        let marked = store
            .mark(id, reminder.payload_version, ReminderStatus::Cancelled)
            .await?;
        let settled = !crate::ports::reminders::editable(reminder.status);
        if marked != Marked::Changed || settled {
            return Ok(Some(CancelReport {
                deliveries,
                reminder: marked,
            }));
        }
    }
    Err(WriteError::Contended)
}

/// The ledger's record of whose delivery a channel of `reminder` is.
fn origin(reminder: &Reminder, channel: Channel) -> Origin {
    Origin {
        reminder_id: reminder.reminder_id.clone(),
        subscriber_id: reminder.subscriber_id.clone(),
        channel,
        fallback_from: None,
        chain_head: false,
        chain: Vec::new(),
        unknown: Default::default(),
    }
}
