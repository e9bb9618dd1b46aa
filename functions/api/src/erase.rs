//! `DELETE /v1/subscribers/{id}`: erase a subscriber ([`reminders::erasure`]). Scope
//! `subscribers/erase`; an end user's token may erase only its own subscriber. Answers what was
//! removed, in counts (no address); a second call answers zeros.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use reminders::clock::Clock;
use reminders::domain::SubscriberId;
use reminders::ports::{Eraser, Ledger, ReminderStore, SubscriberIndex};

use crate::caller::{Caller, Scope};
use crate::error::ApiError;
use crate::App;

pub async fn erase<S, L, C>(
    State(app): State<Arc<App<S, L, C>>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError>
where
    S: ReminderStore + SubscriberIndex + Eraser + reminders::ports::SeriesStore,
    L: Ledger,
    C: Clock,
{
    caller.require(&app.auth, Scope::Erase)?;
    let access = caller.access(&app.auth)?;
    let subscriber = SubscriberId::parse(id).map_err(|e| ApiError::invalid("id", e.to_string()))?;
    if !access.reaches_subscriber(&subscriber) {
        return Err(ApiError::not_found("subscriber"));
    }
    let key = match &app.defaults.suppression_key {
        Some(source) => Some(source.get().await?),
        None => None,
    };
    let now = app.clock.now();
    let retention = app.defaults.retention;
    let erased = reminders::erasure::erase(
        &app.store,
        &app.ledger,
        key.as_ref(),
        &subscriber,
        now,
        retention,
    )
    .await?;
    let mut answer = serde_json::to_value(&erased).unwrap_or_default();
    answer["erased_at"] = serde_json::Value::String(now.to_rfc3339());
    // The event says it happened, in the answer's words (counts, no address). Best effort:
    // the erasure stands either way, and the answer says whether the event went out.
    let published = match &app.defaults.erasure_events {
        None => false,
        Some(bus) => match bus.publish_erased(&answer, now).await {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(subscriber_id = %subscriber, error = %e, "erasure done, but its event was not published");
                false
            }
        },
    };
    answer["event_published"] = serde_json::Value::Bool(published);
    Ok(Json(answer))
}
