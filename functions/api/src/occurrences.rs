//! An occurrence of a series (docs/design.md, "Recurring series") reached through its own
//! reminder id: `DELETE /v1/reminders/{id}` of one not made yet skips it, `PUT` makes it now,
//! detached from the series, and an edit of one already made is recorded on the series first
//! ([`reminders::series::put_unmade`] and its neighbours do each). The reminder routes
//! ([`crate::handlers`]) ask here first; an id that is no such occurrence goes on as any
//! reminder's. The series' own routes are [`crate::series`].

use reminders::clock::Timestamp;
use reminders::domain::series::{MAX_DETACHED, OCCURRENCE_SEPARATOR};
use reminders::domain::{Access, ReminderId, SeriesId};
use reminders::ports::series::SeriesStore;
use reminders::ports::ReminderStore;
use reminders::series::DetachRefused;
use serde_json::{json, Value};

use crate::error::ApiError;

/// `DELETE /v1/reminders/{id}` of an occurrence not made yet: skip it (a cancelled
/// placeholder the maker finds there). `None` when `id` is no such occurrence.
pub async fn skip_unmade<S: ReminderStore + SeriesStore>(
    store: &S,
    access: &Access,
    id: &ReminderId,
    now: Timestamp,
    retention: reminders::domain::Retention,
) -> Result<Option<Value>, ApiError> {
    let Some(skipped) = reminders::series::skip_unmade(store, access, id, now, retention).await?
    else {
        return Ok(None);
    };
    let channels: serde_json::Map<String, Value> = skipped
        .series
        .recipients
        .keys()
        .map(|c| (c.as_str().to_owned(), "cancelled".into()))
        .collect();
    Ok(Some(json!({
        "reminder_id": id.as_str(),
        "series_id": skipped.series.series_id.as_str(),
        "status": skipped.status.as_str(),
        "channels": channels,
    })))
}

/// `PUT /v1/reminders/{id}` with the separator in its id: an occurrence of a series the
/// caller reaches, not made yet, made now from the body and detached from the series (`201`);
/// an occurrence already made is edited as any reminder (`None`); any other id with the
/// separator is refused, so that an id that reads as an occurrence is one.
pub async fn put_unmade<S: ReminderStore + SeriesStore>(
    store: &S,
    access: &Access,
    wanted: &reminders::domain::Reminder,
) -> Result<Option<reminders::domain::Reminder>, ApiError> {
    reminders::series::put_unmade(store, access, wanted)
        .await?
        .map_err(refused)
}

/// An occurrence already made and edited through its own id: recorded on its series (if it is
/// still active: a cancelled or ended one makes nothing more, and its cancel is done), before
/// the edit.
pub async fn record_detached<S: SeriesStore>(
    store: &S,
    id: &SeriesId,
    at: Timestamp,
) -> Result<(), ApiError> {
    reminders::series::record_detached(store, id, at)
        .await?
        .map_err(refused)
}

fn refused(r: DetachRefused) -> ApiError {
    match r {
        DetachRefused::NotAnOccurrence => ApiError::invalid(
            "id",
            format!("id: {OCCURRENCE_SEPARATOR:?} is kept for the occurrences of a series, and this is none of a series you reach"),
        ),
        DetachRefused::Inactive => ApiError::invalid("id", "id: the series is no longer active"),
        DetachRefused::Full => ApiError::conflict(
            "id",
            format!(
                "the series has {MAX_DETACHED} occurrences edited on their own already, the most it keeps"
            ),
        ),
        DetachRefused::Contended => {
            ApiError::conflict("id", "the series kept changing under the write; retry")
        }
    }
}
