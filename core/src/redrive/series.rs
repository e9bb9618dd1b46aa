//! Whether a dead letter's reminder is an occurrence its series no longer makes (docs/design.md,
//! "Recurring series"): an acknowledged edit or cancel ends such an occurrence for good, whatever
//! its delivery's state, so a redrive never sends it at the old time as well as the new.

use crate::domain::series::{occurrence_of, SeriesStatus};
use crate::domain::Reminder;
use crate::ports::{PortError, SeriesStore};
use crate::reminder_writes::WriteError;

/// `reminder` is an occurrence whose series was cancelled, or (unless it was edited on its
/// own, which a series edit leaves alone) whose series' rule no longer makes its instant.
/// A reminder of no series, or of a series gone, is not.
pub(super) async fn unmade<S: SeriesStore>(
    store: &S,
    reminder: &Reminder,
) -> Result<bool, PortError> {
    let Some((series_id, at)) = occurrence_of(&reminder.reminder_id) else {
        return Ok(false);
    };
    let Some(series) = store.get_series(&series_id).await? else {
        return Ok(false);
    };
    if series.subscriber_id != reminder.subscriber_id {
        return Ok(false);
    }
    if series.status == SeriesStatus::Cancelled {
        return Ok(true);
    }
    // A series that follows its subscriber makes each occurrence in the zone read when it was
    // made: after a move its rule reads other instants, and an occurrence made before the move
    // is still its own. Only its cancel ends one here.
    if reminder.detached || series.follows_subscriber() {
        return Ok(false);
    }
    Ok(!series.produces(at))
}

pub(super) fn port_error(e: WriteError) -> PortError {
    match e {
        WriteError::Port(p) => p,
        other => PortError::Invariant {
            op: "redrive.series",
            message: other.to_string(),
        },
    }
}
