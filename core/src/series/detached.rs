//! An occurrence reached through its own reminder id before the maker made it, or edited on its
//! own after: skipped (a cancelled placeholder the maker finds there), made now from the
//! application's body and detached from the series, or recorded on the series as detached before
//! an edit. The API's reminder routes ask here first for an id that reads as an occurrence; the
//! system checker's application does the same.
//!
//! Whatever made an instant on its own is recorded on the series ([`Series::detached`]) before
//! the occurrence is written, so that the maker never makes that instant again (its item may be
//! gone with its TTL once sent) and the series' cancel reaches it wherever it was moved. A
//! failure between the two leaves the instant recorded and unmade, which the same `PUT` again
//! makes; never an occurrence the series does not know.
//!
//! [`Series::detached`]: crate::domain::series::Series::detached

use crate::clock::Timestamp;
use crate::domain::series::{occurrence_of, Series, SeriesStatus, OCCURRENCE_SEPARATOR};
use crate::domain::{Access, Reminder, ReminderId, ReminderStatus, Retention, SeriesId};
use crate::ports::series::{ExpectedSeries, SeriesStore, Written};
use crate::ports::{Inserted, PortError, ReminderStore};

/// How many times a write of the series is tried again when another writer moved it first.
const ROUNDS: usize = 5;

/// Why an occurrence could not be made, or recorded as detached, through its own id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DetachRefused {
    /// The id reads as an occurrence, but of no active series the caller reaches, at no instant
    /// its rule makes, or for another subscriber.
    NotAnOccurrence,
    /// The series was cancelled, ended or deleted since it was read: it makes nothing more.
    Inactive,
    /// The series keeps [`MAX_DETACHED`] instants made on their own already.
    ///
    /// [`MAX_DETACHED`]: crate::domain::series::MAX_DETACHED
    Full,
    /// The series kept changing under the write.
    Contended,
}

/// An occurrence not made yet, skipped through its own id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its series, as read.
    pub series: Series,
    /// The occurrence's status after the skip: `Cancelled`, or what the maker made meanwhile.
    pub status: ReminderStatus,
}

/// `DELETE` of an occurrence not made yet: skip it with a cancelled placeholder the maker finds
/// there. `None` when `id` is no such occurrence (an item already exists, or no active series
/// the caller reaches makes it in the future).
pub async fn skip_unmade<S: ReminderStore + SeriesStore>(
    store: &S,
    access: &Access,
    id: &ReminderId,
    now: Timestamp,
    retention: Retention,
) -> Result<Option<Skipped>, PortError> {
    let Some((sid, at)) = occurrence_of(id) else {
        return Ok(None);
    };
    let Some(s) = store.get_series(&sid).await? else {
        return Ok(None);
    };
    let wanted = s.status == SeriesStatus::Active && at > now && s.produces(at);
    if !access.reaches(s.owner.as_ref(), &s.subscriber_id) || !wanted {
        return Ok(None);
    }
    let mut placeholder = s.occurrence(at, retention);
    placeholder.status = ReminderStatus::Cancelled;
    let _ = store.insert(&placeholder).await?;
    let status = match store.get(id).await? {
        Some(r) => r.status,
        None => ReminderStatus::Cancelled,
    };
    Ok(Some(Skipped { series: s, status }))
}

/// `PUT` of `wanted` under an id with the separator: an occurrence of a series the caller
/// reaches, not made yet, made now from the body and detached from the series (`Some`); an
/// occurrence already made, or made meanwhile, is edited as any reminder (`None`); an id that is
/// no plain reminder's and no such occurrence is refused, so that an id that reads as an
/// occurrence is one.
pub async fn put_unmade<S: ReminderStore + SeriesStore>(
    store: &S,
    access: &Access,
    wanted: &Reminder,
) -> Result<Result<Option<Reminder>, DetachRefused>, PortError> {
    let id = &wanted.reminder_id;
    if !id.as_str().contains(OCCURRENCE_SEPARATOR) || store.get(id).await?.is_some() {
        return Ok(Ok(None));
    }
    let Some((sid, at)) = occurrence_of(id) else {
        return Ok(Err(DetachRefused::NotAnOccurrence));
    };
    let Some(s) = store.get_series(&sid).await? else {
        return Ok(Err(DetachRefused::NotAnOccurrence));
    };
    let ours = access.reaches(s.owner.as_ref(), &s.subscriber_id)
        && s.status == SeriesStatus::Active
        && s.produces(at)
        && s.subscriber_id == wanted.subscriber_id;
    if !ours {
        return Ok(Err(DetachRefused::NotAnOccurrence));
    }
    if let Err(refused) = detach(store, &sid, at).await? {
        return Ok(Err(refused));
    }
    let mut r = wanted.clone();
    r.owner = s.owner.clone();
    r.detached = true;
    match store.insert(&r).await? {
        Inserted::Created => Ok(Ok(Some(r))),
        // Made meanwhile by the maker (or cancelled with the series): edited as any reminder.
        Inserted::AlreadyExists => Ok(Ok(None)),
    }
}

/// An occurrence already made, about to be edited through its own id: recorded on its series
/// first. A series no longer active makes nothing more and its cancel is done: nothing to
/// record, and the edit goes on.
pub async fn record_detached<S: SeriesStore>(
    store: &S,
    id: &SeriesId,
    at: Timestamp,
) -> Result<Result<(), DetachRefused>, PortError> {
    Ok(match detach(store, id, at).await? {
        Err(DetachRefused::Inactive) => Ok(()),
        other => other,
    })
}

/// Record `at` on the series as made on its own, in a write that bumps its version, so that a
/// maker or an edit that read the series before cannot write over it.
async fn detach<S: SeriesStore>(
    store: &S,
    id: &SeriesId,
    at: Timestamp,
) -> Result<Result<(), DetachRefused>, PortError> {
    for _ in 0..ROUNDS {
        let current = store.get_series(id).await?;
        let Some(current) = current.filter(|c| c.status == SeriesStatus::Active) else {
            return Ok(Err(DetachRefused::Inactive));
        };
        if current.is_detached(at) {
            return Ok(Ok(()));
        }
        let mut next = current.clone();
        if !next.detach(at) {
            return Ok(Err(DetachRefused::Full));
        }
        next.version = current.version + 1;
        if store
            .put_series(&next, ExpectedSeries::of(&current))
            .await?
            == Written::Written
        {
            return Ok(Ok(()));
        }
    }
    Ok(Err(DetachRefused::Contended))
}
