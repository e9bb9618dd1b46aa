//! A subscriber's preferences (docs/design.md, "Preferences and quiet hours"): opt-outs, quiet
//! hours in an IANA zone and a fallback order, held to the library's own rules (`Preferences`),
//! replaced whole by a PUT. The consumer reads them after its claim, so a PUT answered before a
//! delivery's claim is honoured by it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use reminders::clock::Clock;
use reminders::domain::preferences::PreferencesWire;
use reminders::domain::{Preferences, SubscriberId};
use reminders::ports::ReminderStore;
use serde_json::Value;

use crate::caller::{Caller, Scope};
use crate::error::ApiError;
use crate::App;

/// The largest preferences body: three channels' windows and orders are a few hundred bytes.
const MAX_BODY: usize = 16 * 1024;
const FIELDS: [&str; 4] = ["opted_out", "quiet_hours", "fallback", "time_zone"];

/// The path's subscriber, if the caller holds the scope and reaches it.
fn subscriber<S, L, C>(
    app: &App<S, L, C>,
    caller: &Caller,
    id: &str,
) -> Result<SubscriberId, ApiError> {
    caller.require(&app.auth, Scope::Preferences)?;
    let access = caller.access(&app.auth)?;
    let s = SubscriberId::parse(id).map_err(|e| ApiError::invalid("id", e.to_string()))?;
    if !access.reaches_subscriber(&s) {
        return Err(ApiError::not_found("subscriber"));
    }
    Ok(s)
}

/// The body, validated: only the four fields, each as `Preferences` requires.
fn decode(raw: &[u8]) -> Result<Preferences, ApiError> {
    if raw.len() > MAX_BODY {
        return Err(ApiError::too_large(
            None,
            format!("the body is over {MAX_BODY} bytes"),
        ));
    }
    let value: Value = serde_json::from_slice(raw)
        .map_err(|_| ApiError::invalid("body", "body: must be a JSON object"))?;
    let Some(object) = value.as_object() else {
        return Err(ApiError::invalid("body", "body: must be a JSON object"));
    };
    if object.keys().any(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid(
            "body",
            "body: unknown field, expected opted_out, quiet_hours, fallback or time_zone",
        ));
    }
    check_quiet_hours(object.get("quiet_hours"))?;
    let de = serde_path_to_error::deserialize::<_, PreferencesWire>(value);
    let wire = de.map_err(|e| {
        let path = e.path().to_string();
        let message = reminders::domain::reminder::redact(&e.into_inner().to_string());
        ApiError::invalid(path.clone(), format!("{path}: {message}"))
    })?;
    Preferences::try_from(wire).map_err(|e| {
        let field = e.field();
        ApiError::invalid(field.clone(), format!("{field}: {}", e.requirement()))
    })
}

/// `quiet_hours`' keys are channels and each window holds `start`, `end` and `zone` only,
/// checked before decoding so that no error names a key the caller typed (an unknown key may
/// be anything, an address even): the field named is `quiet_hours` or a channel's window.
fn check_quiet_hours(quiet: Option<&Value>) -> Result<(), ApiError> {
    let Some(map) = quiet.and_then(Value::as_object) else {
        return Ok(());
    };
    for (channel, window) in map {
        if channel.parse::<reminders::domain::Channel>().is_err() {
            return Err(ApiError::invalid(
                "quiet_hours",
                "quiet_hours: keys must be channels (push, email or sms)",
            ));
        }
        let unknown = window.as_object().is_some_and(|w| {
            w.keys()
                .any(|k| !["start", "end", "zone"].contains(&k.as_str()))
        });
        if unknown {
            let field = format!("quiet_hours.{channel}");
            let message = format!("{field}: unknown field, expected start, end and zone");
            return Err(ApiError::invalid(field, message));
        }
    }
    Ok(())
}

pub async fn put<S, L, C>(
    State(app): State<Arc<App<S, L, C>>>,
    caller: Caller,
    Path(id): Path<String>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Preferences>, ApiError>
where
    S: ReminderStore + reminders::ports::series::SeriesStore,
    C: Clock,
{
    let subscriber = subscriber(&app, &caller, &id)?;
    let raw = raw.map_err(|e| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(None, e.body_text()),
        _ => ApiError::invalid("body", e.body_text()),
    })?;
    let prefs = decode(&raw)?;
    app.store.put_preferences(&subscriber, &prefs).await?;
    // A series in the zone "subscriber" follows a new time_zone from its next occurrence.
    let zone = prefs.time_zone.as_ref().map(|z| z.name());
    reminders::series::follow_zone(&app.store, &subscriber, zone).await?;
    Ok(Json(prefs))
}

pub async fn show<S, L, C>(
    State(app): State<Arc<App<S, L, C>>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Preferences>, ApiError>
where
    S: ReminderStore,
{
    let subscriber = subscriber(&app, &caller, &id)?;
    match app.store.preferences(&subscriber).await? {
        Some(prefs) => Ok(Json(prefs)),
        None => Err(ApiError::not_found("preferences for this subscriber")),
    }
}
