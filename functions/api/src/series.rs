//! Series (docs/design.md, "Recurring series"): `PUT`, `GET` and `DELETE /v1/series/{id}`, and a
//! subscriber's series. The decisions are the library's ([`reminders::series`]); this file decodes
//! and answers. An occurrence reached through its own reminder id is answered in
//! [`crate::occurrences`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use reminders::clock::{Clock, Timestamp};
use reminders::domain::series::{occurrence_id, NewSeries, Series, SeriesStatus};
use reminders::domain::{Access, ReminderId, SeriesId, SubscriberId};
use reminders::listing;
use reminders::ports::series::SeriesStore;
use reminders::ports::{Ledger, ReminderStore};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::body::{self, Channels, ContentBody};
use crate::caller::{Caller, Scope};
use crate::error::ApiError;
use crate::{view, App};

type Shared<S, L, C> = State<Arc<App<S, L, C>>>;

/// How many of the next occurrences a series' GET shows, and of those made (the latest).
const NEXT_SHOWN: usize = 5;
const MADE_SHOWN: usize = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PutBody {
    subscriber_id: String,
    rule: String,
    zone: String,
    starts_at: Value,
    #[serde(default)]
    until: Option<Value>,
    #[serde(default)]
    fresh_for_secs: Option<u64>,
    channels: Channels,
    content: ContentBody,
}

fn series_id(id: &str) -> Result<SeriesId, ApiError> {
    SeriesId::parse(id).map_err(|e| ApiError::invalid("id", e.to_string()))
}

/// The series a body asks for, and whether it named its freshness (without, a repeated body
/// is the same whatever the default is now, as for reminders).
fn decode<S, L, C>(app: &App<S, L, C>, id: &str, raw: &[u8]) -> Result<(Series, bool), ApiError> {
    if raw.len() > body::MAX_REQUEST_BYTES {
        return Err(ApiError::too_large(None, "the body is too large"));
    }
    let series_id = series_id(id)?;
    let de = &mut serde_json::Deserializer::from_slice(raw);
    let b: PutBody = serde_path_to_error::deserialize(de).map_err(body::refused)?;
    let subscriber_id = SubscriberId::parse(b.subscriber_id.as_str())
        .map_err(|e| ApiError::invalid("subscriber_id", e.to_string()))?;
    if matches!(b.fresh_for_secs, Some(0 | 1)) {
        return Err(ApiError::invalid(
            "fresh_for_secs",
            "fresh_for_secs: must be at least 2 (more than the one-second clock margin)",
        ));
    }
    let new = NewSeries {
        series_id,
        subscriber_id,
        rule: b.rule,
        zone: b.zone,
        starts_at: body::when("starts_at", &b.starts_at)?,
        until: b
            .until
            .as_ref()
            .map(|v| body::when("until", v))
            .transpose()?,
        fresh_for: b.fresh_for_secs.map(Duration::from_secs),
        content: body::content(b.content)?,
        recipients: body::recipients(b.channels, &app.defaults.sms_countries)?,
    };
    let given = b.fresh_for_secs.is_some();
    let s = Series::new(new, app.defaults.freshness).map_err(|e| match e {
        // The reminder's rules, in the body's words (`channels`, `content.data`; 413 for size).
        reminders::domain::series::SeriesError::Reminder(e) => ApiError::from(e),
        e => ApiError::invalid(e.field(), e.to_string()),
    })?;
    Ok((s, given))
}

fn writer<S, L, C>(app: &App<S, L, C>, caller: &Caller) -> Result<Access, ApiError> {
    caller.require(&app.auth, Scope::Write)?;
    match caller.access(&app.auth)? {
        Access::Subscriber(_) => Err(crate::caller::end_user_refused()),
        access => Ok(access),
    }
}

/// The stored series the caller reaches, or `404`.
async fn reached<S: SeriesStore>(
    store: &S,
    access: &Access,
    id: &SeriesId,
) -> Result<Series, ApiError> {
    store
        .get_series(id)
        .await?
        .filter(|s| access.reaches(s.owner.as_ref(), &s.subscriber_id))
        .ok_or_else(|| ApiError::not_found("series"))
}

/// Create (`201`), the same body again (`200`), or an edit (`200`); `409` once cancelled or
/// ended.
pub async fn put<S, L, C>(
    State(app): Shared<S, L, C>,
    caller: Caller,
    Path(id): Path<String>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError>
where
    S: ReminderStore + SeriesStore,
    L: Ledger,
    C: Clock,
{
    use reminders::series::Put;
    let access = writer(&app, &caller)?;
    let raw = raw.map_err(|e| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(None, e.body_text()),
        _ => ApiError::invalid("body", e.body_text()),
    })?;
    let (mut wanted, fresh_given) = decode(&app, &id, &raw)?;
    if !fresh_given {
        if let Some(current) = app.store.get_series(&wanted.series_id).await? {
            wanted.fresh_for = current.fresh_for;
        }
    }
    let now = app.clock.now();
    let retention = app.defaults.retention;
    let put = reminders::series::put(&app.store, &app.ledger, &access, wanted, now, retention)
        .await?
        .map_err(refused)?;
    let (status, s) = match put {
        Put::Created(s) => (StatusCode::CREATED, s),
        Put::Same(s) | Put::Edited(s) => (StatusCode::OK, s),
    };
    Ok((
        status,
        Json(show_series(&app.store, &app.ledger, &s, now).await?),
    )
        .into_response())
}

fn refused(r: reminders::series::Refused) -> ApiError {
    use reminders::series::Refused;
    match r {
        Refused::NotFound => ApiError::not_found("series"),
        Refused::Final(status) => ApiError::conflict(
            "status",
            format!(
                "the series is {}: it can no longer change; create another series",
                status.as_str()
            ),
        ),
        Refused::SubscriberChanged => ApiError::conflict(
            "subscriber_id",
            "subscriber_id cannot change: create another series",
        ),
        Refused::Contended => {
            ApiError::conflict("id", "the series kept changing under the write; retry")
        }
        Refused::NoSubscriberZone => ApiError::invalid(
            "zone",
            "zone: \"subscriber\" needs the subscriber's time_zone: set it with PUT \
             /v1/subscribers/{id}/preferences, or name an IANA zone",
        ),
    }
}

pub async fn show<S, L, C>(
    State(app): Shared<S, L, C>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError>
where
    S: ReminderStore + SeriesStore,
    L: Ledger,
    C: Clock,
{
    caller.require(&app.auth, Scope::Read)?;
    let access = caller.access(&app.auth)?;
    let s = reached(&app.store, &access, &series_id(&id)?).await?;
    let now = app.clock.now();
    Ok(Json(show_series(&app.store, &app.ledger, &s, now).await?))
}

/// Cancel the series and every occurrence not yet sent.
pub async fn cancel<S, L, C>(
    State(app): Shared<S, L, C>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError>
where
    S: ReminderStore + SeriesStore,
    L: Ledger,
    C: Clock,
{
    let access = writer(&app, &caller)?;
    let id = series_id(&id)?;
    let (now, retention) = (app.clock.now(), app.defaults.retention);
    let (s, cancels) =
        reminders::series::cancel(&app.store, &app.ledger, &access, &id, now, retention)
            .await?
            .map_err(refused)?;
    // Each wall time as the series' GET shows it.
    let s = in_zone_now(&app.store, &s).await?;
    let occurrences: Vec<Value> = cancels
        .iter()
        .map(|(at, report)| {
            let channels: serde_json::Map<String, Value> = report
                .deliveries
                .iter()
                .map(|(c, o)| (c.as_str().to_owned(), view::cancelled(o).into()))
                .collect();
            json!({
                "reminder_id": occurrence_id(&id, *at).as_str(),
                "occurrence_at": view::time(*at),
                "wall_time": s.wall_time(*at),
                "channels": channels,
            })
        })
        .collect();
    Ok(Json(json!({
        "series_id": id.as_str(),
        "status": s.status.as_str(),
        "occurrences": occurrences,
    })))
}

/// A subscriber's series, by id, a page at a time.
pub async fn list<S, L, C>(
    State(app): Shared<S, L, C>,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError>
where
    S: SeriesStore,
{
    caller.require(&app.auth, Scope::Read)?;
    let access = caller.access(&app.auth)?;
    let subscriber = SubscriberId::parse(id).map_err(|e| ApiError::invalid("id", e.to_string()))?;
    if !access.reaches_subscriber(&subscriber) {
        return Err(ApiError::not_found("subscriber"));
    }
    let limit = crate::query::page_limit(&query)?;
    // The cursor names where the page ended (a series' start and id), not a series that
    // must still exist: a page goes on where it stopped after that series is deleted.
    // Sealed: it may name another owner's series, left out of the page.
    let seal = crate::query::cursor_seal(&app.defaults).await?;
    let cursor = query.get("cursor").map(String::as_str);
    let page = listing::series_page(&app.store, &seal, &access, &subscriber, cursor, limit).await?;
    let items: Vec<Value> = page.items.iter().map(summary).collect();
    Ok(Json(json!({
        "series": items,
        "next_cursor": page.next_cursor,
    })))
}

fn summary(s: &Series) -> Value {
    json!({
        "series_id": s.series_id.as_str(),
        "subscriber_id": s.subscriber_id.as_str(),
        "status": s.status.as_str(),
        "version": s.version,
        "rule": s.rule.as_text(),
        "zone": s.zone,
        "local_zone": s.follows_subscriber().then_some(s.local_zone.as_deref()).flatten(),
        "starts_at": view::time(s.starts_at),
        "until": s.until.map(view::time),
        "fresh_for_secs": s.fresh_for.as_secs(),
        "channels": s.recipients.keys().map(|c| c.as_str()).collect::<Vec<_>>(),
    })
}

/// `s` in the zone its wall times are answered in: for the zone "subscriber", the zone the
/// subscriber has now (its next occurrences are made in it).
async fn in_zone_now<S: ReminderStore>(store: &S, s: &Series) -> Result<Series, ApiError> {
    let mut here = s.clone();
    if s.follows_subscriber() {
        let prefs = store.preferences(&s.subscriber_id).await?;
        here.localise(prefs.and_then(|p| p.time_zone).as_ref().map(|z| z.name()));
    }
    Ok(here)
}

/// The series, its next occurrences, and those made (the latest first), each with its status
/// and, while its reminder is kept, its outcome (what became of it, as the reminder's own GET
/// says).
async fn show_series<S: ReminderStore, L: Ledger>(
    store: &S,
    ledger: &L,
    s: &Series,
    now: Timestamp,
) -> Result<Value, ApiError> {
    let here = in_zone_now(store, s).await?;
    let s = &here;
    let mut out = summary(s);
    out["content"] = view::content(&s.content);
    let at = |t: Timestamp, id: &ReminderId| {
        json!({
            "reminder_id": id.as_str(),
            "occurrence_at": view::time(t),
            "wall_time": s.wall_time(t),
        })
    };
    let next: Vec<Value> = match s.status {
        SeriesStatus::Active => {
            let after = Timestamp::from_millis(now.as_millis() - 1);
            s.instants_between(Some(after), None, NEXT_SHOWN)
                .into_iter()
                .map(|t| at(t, &occurrence_id(&s.series_id, t)))
                .collect()
        }
        _ => Vec::new(),
    };
    let mut made = Vec::new();
    for &t in s.made.iter().rev().take(MADE_SHOWN) {
        let id = occurrence_id(&s.series_id, t);
        let mut o = at(t, &id);
        match store.get(&id).await? {
            Some(r) => {
                o["status"] = r.status.as_str().into();
                o["outcome"] = view::reminder(&r, ledger, store).await?["outcome"].take();
            }
            None => o["status"] = "removed".into(),
        }
        made.push(o);
    }
    out["next_occurrences"] = next.into();
    out["occurrences"] = made.into();
    Ok(out)
}
