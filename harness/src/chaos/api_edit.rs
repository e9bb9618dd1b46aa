//! An application's edit of a reminder through the API, as the API's handler makes it (an
//! occurrence of a series recorded as put on its own first), bounded like a Lambda invocation:
//! the one way the application's side and the fallback orders' scenarios change a reminder.

use super::dice::{invoke, API_TIMEOUT};
use super::world::World;
use reminders_core::clock::Timestamp;
use reminders_core::domain::ReminderId;
use reminders_core::reminder_writes::{self, Edit, Edited};

/// The application's edit through the API: an occurrence edited through its own id is recorded
/// on its series first (so that the series' cancel reaches it wherever it moves, whatever the
/// series has forgotten of what it made) and detached; then the edit. One invocation: `None` when
/// it timed out or stopped.
pub(super) async fn edit_through_api(
    world: &World,
    id: &ReminderId,
    mut changes: Edit,
    now: Timestamp,
) -> Option<Result<Edited, reminder_writes::WriteError>> {
    let ports = &world.ports;
    let work = async {
        if let Some((series, at)) = reminders_core::domain::series::occurrence_of(id) {
            changes.detach = true;
            let recorded =
                reminders_core::series::record_detached(&*ports.reminders, &series, at).await;
            match recorded {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Ok(Edited::Missing),
                Err(e) => return Err(reminder_writes::WriteError::Port(e)),
            }
        }
        reminder_writes::edit(
            &ports.reminders,
            &ports.ledger,
            id,
            changes,
            now,
            world.retention,
        )
        .await
    };
    invoke(work, API_TIMEOUT).await
}
