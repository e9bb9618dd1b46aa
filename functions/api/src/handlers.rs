//! One function per route. Each reads the ports through the library (`reminder_writes`, the ledger,
//! the subscriber index) and answers JSON; every failure is an [`ApiError`].

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use reminders::clock::Clock;
use reminders::domain::{Access, Reminder, ReminderId, SubscriberId};
use reminders::ports::{Ledger, ReminderStore, SubscriberIndex};
use reminders::reminder_writes::{self, Edit, Edited};

use crate::caller::{end_user_refused, Caller, Scope};
use crate::error::ApiError;
use crate::{body, view, App};

type Shared<S, L, C> = State<Arc<App<S, L, C>>>;

fn reminder_id(id: &str) -> Result<ReminderId, ApiError> {
    ReminderId::parse(id).map_err(|e| ApiError::invalid("id", e.to_string()))
}

/// What a caller that may change reminders reaches (an end user's token may not).
fn writer<S, L, C>(app: &App<S, L, C>, caller: &Caller) -> Result<Access, ApiError> {
    caller.require(&app.auth, Scope::Write)?;
    match caller.access(&app.auth)? {
        Access::Subscriber(_) => Err(end_user_refused()),
        access => Ok(access),
    }
}

/// Create, repeat or edit (`PUT` is idempotent by id).
pub async fn put<S, L, C>(
    State(app): Shared<S, L, C>,
    caller: Caller,
    Path(id): Path<String>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError>
where
    S: ReminderStore + SubscriberIndex + reminders::ports::SeriesStore,
    L: Ledger,
    C: Clock,
{
    let access = writer(&app, &caller)?;
    let raw = raw.map_err(|e| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(None, e.body_text()),
        _ => ApiError::invalid("body", e.body_text()),
    })?;
    let wanted = body::decode(&id, &raw, &app.defaults, app.clock.now())?;
    refuse_stale_on_arrival(&app, &wanted).await?;
    if let Some(created) =
        crate::occurrences::put_unmade(&app.store, &access, &wanted.reminder).await?
    {
        let state = view::reminder(&created, &app.ledger, &app.store).await?;
        return Ok((StatusCode::CREATED, Json(state)).into_response());
    }
    let created = reminder_writes::create_owned(
        &app.store,
        new_reminder(&wanted.reminder),
        access.owner().cloned(),
        app.defaults.freshness,
        app.defaults.retention,
        app.clock.now(),
    )
    .await?;
    if let Some(r) = created {
        let state = view::reminder(&r, &app.ledger, &app.store).await?;
        return Ok((StatusCode::CREATED, Json(state)).into_response());
    }
    let current = replace(&app, &access, wanted).await?;
    Ok(Json(view::reminder(&current, &app.ledger, &app.store).await?).into_response())
}

/// A new reminder already stale by every clock within the margin could only expire: refused,
/// naming the field to change (its freshness, or its due time when no freshness allowed would
/// do), rather than acknowledged `201 scheduled` and never sent. A repeat
/// of one created while it was fresh (its answer lost, retried later) goes on as any repeat:
/// only when no item exists is it refused.
async fn refuse_stale_on_arrival<S, L, C>(
    app: &App<S, L, C>,
    wanted: &body::Wanted,
) -> Result<(), ApiError>
where
    S: ReminderStore,
    C: Clock,
{
    use reminders::domain::reminder::{freshness, Freshness};
    let r = &wanted.reminder;
    let now = app.clock.now();
    if freshness(r.fresh_until, now) != Freshness::Stale {
        return Ok(());
    }
    if app.store.get(&r.reminder_id).await?.is_some() {
        return Ok(());
    }
    // The freshness the body gave, unless no freshness allowed would make it fresh again.
    let latest = freshness(
        r.due_at.plus(reminders::domain::reminder::MAX_FRESHNESS),
        now,
    );
    let field = match wanted.freshness_field {
        Some(f) if latest != Freshness::Stale => f,
        _ => wanted.due_field,
    };
    Err(ApiError::invalid(
        field,
        format!(
            "{field}: the reminder would be stale already (fresh until {}, now {}): it could never be sent; give a due time or a freshness that ends ahead of now",
            r.fresh_until.to_rfc3339(),
            now.to_rfc3339()
        ),
    ))
}

/// The reminder already exists: the same body answers its state, a different one edits it
/// while an edit is allowed (the rules of `reminder_writes`), else `409` naming why.
async fn replace<S, L, C>(
    app: &App<S, L, C>,
    access: &Access,
    wanted: body::Wanted,
) -> Result<Reminder, ApiError>
where
    S: ReminderStore + reminders::ports::SeriesStore,
    L: Ledger,
    C: Clock,
{
    let body::Wanted {
        reminder: wanted,
        freshness_given,
        ..
    } = wanted;
    let Some(current) = app.store.get(&wanted.reminder_id).await? else {
        // Created and gone between two reads (its TTL): a retry creates it again.
        return Err(ApiError::conflict(
            "id",
            "the reminder was removed meanwhile; retry",
        ));
    };
    // Another owner's: as if there were none (its id is taken, and nothing says by whom).
    if !access.reaches(current.owner.as_ref(), &current.subscriber_id) {
        return Err(ApiError::not_found("reminder"));
    }
    if same(&current, &wanted, freshness_given) {
        return Ok(current);
    }
    if current.subscriber_id != wanted.subscriber_id {
        return Err(ApiError::conflict(
            "subscriber_id",
            "subscriber_id cannot change: the delivery keys derive from it; create another reminder",
        ));
    }
    // An occurrence edited alone is recorded on its series first, so that the series' cancel
    // reaches it wherever it is moved, however many occurrences are made after it.
    if let Some((sid, at)) = reminders::domain::series::occurrence_of(&wanted.reminder_id) {
        crate::occurrences::record_detached(&app.store, &sid, at).await?;
    }
    let changes = Edit {
        due_at: Some(wanted.due_at),
        fresh_until: Some(wanted.fresh_until),
        content: Some(wanted.content.clone()),
        recipients: Some(wanted.recipients.values().cloned().collect()),
        // An occurrence edited through its own id: the series' edits leave it alone.
        detach: reminders::domain::series::occurrence_of(&wanted.reminder_id).is_some(),
        may_make_stale: false,
    };
    let now = app.clock.now();
    match reminder_writes::edit_as(
        access,
        &app.store,
        &app.ledger,
        &wanted.reminder_id,
        changes,
        now,
        app.defaults.retention,
    )
    .await?
    {
        Edited::Edited(r) => Ok(r),
        Edited::Missing => Err(ApiError::conflict(
            "id",
            "the reminder was removed meanwhile; retry",
        )),
        Edited::Readded(channel) => Err(ApiError::conflict(
            "channels",
            format!(
                "{channel} was removed by an earlier edit after it was enqueued, and its delivery \
                 ended as edited away: it cannot be sent again; create another reminder"
            ),
        )),
        Edited::NothingLeft => Err(ApiError::conflict(
            "status",
            "every channel has already settled (delivered, dead, expired or cancelled): an edit \
             would send nothing; create another reminder",
        )),
        Edited::Final(status) => Err(ApiError::conflict(
            "status",
            format!(
                "the reminder is {}: it can no longer change; create another reminder",
                status.as_str()
            ),
        )),
    }
}

/// The same body: everything the application wrote is what is stored. A body that named no
/// freshness took the default, which may have changed since: any stored one is the same.
fn same(current: &Reminder, wanted: &Reminder, freshness_given: bool) -> bool {
    current.subscriber_id == wanted.subscriber_id
        && current.due_at == wanted.due_at
        && (!freshness_given || current.fresh_until == wanted.fresh_until)
        && current.content == wanted.content
        && current.recipients == wanted.recipients
        && current.unsendable.is_empty()
}

fn new_reminder(r: &Reminder) -> reminders::domain::NewReminder {
    reminders::domain::NewReminder {
        reminder_id: r.reminder_id.clone(),
        subscriber_id: r.subscriber_id.clone(),
        due_at: r.due_at,
        fresh_until: Some(r.fresh_until),
        content: r.content.clone(),
        recipients: r.recipients.values().cloned().collect(),
    }
}

pub async fn show<S, L, C>(
    State(app): Shared<S, L, C>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError>
where
    S: ReminderStore,
    L: Ledger,
{
    caller.require(&app.auth, Scope::Read)?;
    let access = caller.access(&app.auth)?;
    let id = reminder_id(&id)?;
    let r = app
        .store
        .get(&id)
        .await?
        .filter(|r| access.reaches(r.owner.as_ref(), &r.subscriber_id))
        .ok_or_else(|| ApiError::not_found("reminder"))?;
    Ok(Json(view::reminder(&r, &app.ledger, &app.store).await?))
}

/// Cancel: the ledger first, per channel (ordered against claims), then the reminder.
pub async fn cancel<S, L, C>(
    State(app): Shared<S, L, C>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError>
where
    S: ReminderStore + reminders::ports::SeriesStore,
    L: Ledger,
    C: Clock,
{
    let access = writer(&app, &caller)?;
    let id = reminder_id(&id)?;
    let now = app.clock.now();
    let retention = app.defaults.retention;
    let mut report =
        reminder_writes::cancel_as(&access, &app.store, &app.ledger, &id, now, retention).await?;
    if report.is_none() {
        // An occurrence of a series not made yet: skipped by a cancelled placeholder.
        let store = &app.store;
        if let Some(answer) =
            crate::occurrences::skip_unmade(store, &access, &id, now, retention).await?
        {
            if answer["status"] == "cancelled" {
                return Ok(Json(answer));
            }
            // Made meanwhile: cancelled as any reminder.
            report = reminder_writes::cancel_as(&access, store, &app.ledger, &id, now, retention)
                .await?;
        }
    }
    let report = report.ok_or_else(|| ApiError::not_found("reminder"))?;
    let status = match app.store.get(&id).await? {
        Some(r) => r.status.as_str(),
        None => "cancelled",
    };
    let channels: serde_json::Map<String, serde_json::Value> = report
        .deliveries
        .iter()
        .map(|(c, outcome)| (c.as_str().to_owned(), view::cancelled(outcome).into()))
        .collect();
    Ok(Json(serde_json::json!({
        "reminder_id": id.as_str(),
        "status": status,
        "channels": channels,
    })))
}

pub async fn list<S, L, C>(
    State(app): Shared<S, L, C>,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, ApiError>
where
    S: SubscriberIndex,
{
    caller.require(&app.auth, Scope::Read)?;
    let access = caller.access(&app.auth)?;
    let subscriber = SubscriberId::parse(id).map_err(|e| ApiError::invalid("id", e.to_string()))?;
    if !access.reaches_subscriber(&subscriber) {
        return Err(ApiError::not_found("subscriber"));
    }
    let limit = crate::query::page_limit(&query)?;
    let seal = crate::query::cursor_seal(&app.defaults).await?;
    let cursor = query.get("cursor").map(String::as_str);
    // Only what the caller reaches; the cursor, sealed, reveals nothing of what it skipped.
    let page =
        reminders::listing::reminders_page(&app.store, &seal, &access, &subscriber, cursor, limit)
            .await?;
    Ok(Json(view::page(&page)))
}

/// Any other path or method.
pub async fn no_route() -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        field: None,
        message: "no such route: see openapi.yaml".to_owned(),
    }
}

/// A route's path with a method it does not serve.
pub async fn wrong_method() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        code: "method_not_allowed",
        field: None,
        message: "this path does not serve that method: see openapi.yaml".to_owned(),
    }
}
