//! An occurrence of a series (docs/design.md, "Recurring series") not made yet, reached through its
//! own reminder id: `DELETE /v1/reminders/{id}` skips it, `PUT /v1/reminders/{id}` makes it now,
//! detached from the series. The reminder routes ([`crate::handlers`]) ask here first; an id that
//! is no such occurrence goes on as any reminder's. The series' own routes are [`crate::series`].

use reminders::clock::{Clock, Timestamp};
use reminders::domain::series::{occurrence_of, SeriesStatus};
use reminders::domain::{Access, ReminderId, ReminderStatus, SeriesId};
use reminders::ports::series::SeriesStore;
use reminders::ports::ReminderStore;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::App;

/// `DELETE /v1/reminders/{id}` of an occurrence not made yet: skip it (a cancelled
/// placeholder the maker finds there). `None` when `id` is no such occurrence.
pub async fn skip_unmade<S: ReminderStore + SeriesStore>(
    store: &S,
    access: &Access,
    id: &ReminderId,
    now: Timestamp,
    retention: reminders::domain::Retention,
) -> Result<Option<Value>, ApiError> {
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
    let channels: serde_json::Map<String, Value> = s
        .recipients
        .keys()
        .map(|c| (c.as_str().to_owned(), "cancelled".into()))
        .collect();
    Ok(Some(json!({
        "reminder_id": id.as_str(),
        "series_id": sid.as_str(),
        "status": status.as_str(),
        "channels": channels,
    })))
}

/// `PUT /v1/reminders/{id}` with the separator in its id: an occurrence of a series the
/// caller reaches, not made yet, made now from the body and detached from the series (`201`);
/// an occurrence already made is edited as any reminder (`None`); any other id with the
/// separator is refused, so that an id that reads as an occurrence is one.
pub async fn put_unmade<S, L, C>(
    app: &App<S, L, C>,
    access: &Access,
    wanted: &reminders::domain::Reminder,
) -> Result<Option<reminders::domain::Reminder>, ApiError>
where
    S: ReminderStore + SeriesStore,
    C: Clock,
{
    use reminders::domain::series::OCCURRENCE_SEPARATOR;
    let id = &wanted.reminder_id;
    if !id.as_str().contains(OCCURRENCE_SEPARATOR) || app.store.get(id).await?.is_some() {
        return Ok(None);
    }
    let refused = || {
        ApiError::invalid(
            "id",
            format!("id: {OCCURRENCE_SEPARATOR:?} is kept for the occurrences of a series, and this is none of a series you reach"),
        )
    };
    let (sid, at) = occurrence_of(id).ok_or_else(refused)?;
    let s = app.store.get_series(&sid).await?.ok_or_else(refused)?;
    let ok = access.reaches(s.owner.as_ref(), &s.subscriber_id)
        && s.status == SeriesStatus::Active
        && s.produces(at)
        && s.subscriber_id == wanted.subscriber_id;
    if !ok {
        return Err(refused());
    }
    // Recorded on the series first, then made: the maker never makes this instant again (its
    // item may be gone with its TTL once sent) and the series' cancel reaches it wherever it
    // is moved. A failure between the two leaves the instant recorded and unmade, which this
    // `PUT` again makes; never an occurrence the series does not know.
    detach(&app.store, &sid, at, Inactive::Refuse).await?;
    let mut r = wanted.clone();
    r.owner = s.owner.clone();
    r.detached = true;
    match app.store.insert(&r).await? {
        reminders::ports::Inserted::Created => Ok(Some(r)),
        // Made meanwhile by the maker (or cancelled with the series): edited as any reminder.
        reminders::ports::Inserted::AlreadyExists => Ok(None),
    }
}

/// An occurrence already made and edited through its own id: recorded on its series (if it is
/// still active: a cancelled or ended one makes nothing more, and its cancel is done), before
/// the edit.
pub async fn record_detached<S: SeriesStore>(
    store: &S,
    id: &SeriesId,
    at: Timestamp,
) -> Result<(), ApiError> {
    detach(store, id, at, Inactive::Skip).await
}

/// What [`detach`] does when the series is gone or no longer active.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inactive {
    /// Refused, naming `id`: an occurrence not made yet cannot be made for it.
    Refuse,
    /// Nothing to record.
    Skip,
}

/// Record on the series an occurrence made on its own ([`Series::detached`]), in a write that
/// bumps its version, so that a maker or an edit that read it before cannot write over it.
///
/// [`Series::detached`]: reminders::domain::series::Series::detached
async fn detach<S: SeriesStore>(
    store: &S,
    id: &SeriesId,
    at: Timestamp,
    inactive: Inactive,
) -> Result<(), ApiError> {
    use reminders::ports::series::{ExpectedSeries, Written};
    let refused = || ApiError::invalid("id", "id: the series is no longer active");
    for _ in 0..5 {
        let current = store.get_series(id).await?;
        let active = current
            .as_ref()
            .filter(|c| c.status == SeriesStatus::Active);
        let Some(current) = active else {
            return match inactive {
                Inactive::Refuse => Err(refused()),
                Inactive::Skip => Ok(()),
            };
        };
        if current.is_detached(at) {
            return Ok(());
        }
        let mut next = current.clone();
        if !next.detach(at) {
            return Err(ApiError::conflict(
                "id",
                format!(
                    "the series has {} occurrences edited on their own already, the most it keeps",
                    reminders::domain::series::MAX_DETACHED
                ),
            ));
        }
        next.version = current.version + 1;
        if store.put_series(&next, ExpectedSeries::of(current)).await? == Written::Written {
            return Ok(());
        }
    }
    Err(ApiError::conflict(
        "id",
        "the series kept changing under the write; retry",
    ))
}
