//! The router on in-memory ports, and one call through it as an HTTP request.

#![allow(dead_code)]

pub mod standup;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use reminders::clock::SystemClock;
use reminders::domain::{DeliveryKey, Retention};
use reminders::domain::{Reminder, ReminderId};
use reminders::ledger::DeliveryRecord;
use reminders::ports::{
    Cas, Expected, Ledger, MemoryLedger, MemoryReminderStore, PortError, ReminderStore,
};
use reminders_api::{router, App, Defaults};
use reminders_harness::around::{Around, Call, Faults, Hook, SingleReads};
use reminders_harness::ManualClock;
use serde_json::{json, Value};
use tower::ServiceExt;

/// The recipients every [`body`] lists.
pub const RECIPIENTS: [&str; 2] = ["user@example.org", "+14155550100"];

/// A valid PUT body: email and SMS, due in 2030, fresh for an hour.
pub fn body(subscriber: &str, subject: &str) -> Value {
    json!({
        "subscriber_id": subscriber,
        "due_at": "2030-01-01T10:00:00Z",
        "fresh_for_secs": 3600,
        "channels": {"email": RECIPIENTS[0], "sms": RECIPIENTS[1]},
        "content": {"subject": subject, "body": format!("{subject}, in full")},
    })
}

/// A valid series body: email and SMS, `rule` in Paris from `starts_at`, fresh for an hour.
pub fn series_body(subscriber: &str, rule: &str, starts_at: &str, subject: &str) -> Value {
    json!({
        "subscriber_id": subscriber,
        "rule": rule,
        "zone": "Europe/Paris",
        "starts_at": starts_at,
        "fresh_for_secs": 3600,
        "channels": {"email": RECIPIENTS[0], "sms": RECIPIENTS[1]},
        "content": {"subject": subject, "body": format!("{subject}, in full")},
    })
}

pub fn defaults() -> Defaults {
    Defaults {
        freshness: Duration::from_secs(3600),
        retention: Retention::default(),
        sms_countries: Default::default(),
        suppression_key: None,
        erasure_events: None,
    }
}

/// The router with no authorization: every request is an operator's.
pub fn operator() -> reminders_api::Auth {
    reminders_api::Auth {
        identity: reminders_api::Identity::Operator,
        ..reminders_api::Auth::default()
    }
}

#[derive(Clone)]
pub struct Harness {
    pub router: Router,
    pub store: Arc<MemoryReminderStore>,
    /// The ledger the router writes (an unused one beside a corrupt ledger).
    pub ledger: Arc<MemoryLedger>,
    pub ledger_faults: Faults,
    store_faults: Faults,
}

impl Harness {
    pub fn new() -> Self {
        let (ledger_faults, store_faults) = (Faults::default(), Faults::default());
        let store = Arc::new(MemoryReminderStore::new(8));
        let ledger = Arc::new(MemoryLedger::default());
        let router = router(App {
            store: Around::new(store.clone(), (store_faults.clone(), SingleReads)),
            ledger: Around::new(ledger.clone(), ledger_faults.clone()),
            clock: SystemClock,
            defaults: defaults(),
            auth: operator(),
        });
        Self {
            router,
            store,
            ledger,
            ledger_faults,
            store_faults,
        }
    }

    /// Callers as `auth` states them, over a shared store (one per test).
    pub fn with_auth(auth: reminders_api::Auth) -> Self {
        let store = Arc::new(MemoryReminderStore::new(8));
        let ledger = Arc::new(MemoryLedger::default());
        let router = router(App {
            store: store.clone(),
            ledger: ledger.clone(),
            clock: SystemClock,
            defaults: defaults(),
            auth,
        });
        Self {
            router,
            store,
            ledger,
            ledger_faults: Faults::default(),
            store_faults: Faults::default(),
        }
    }

    /// Callers as `auth` states them, on a clock the test moves (a series' occurrences are
    /// made ahead of its now), with faults of both stores to inject.
    pub fn at(clock: ManualClock, auth: reminders_api::Auth) -> Self {
        let (ledger_faults, store_faults) = (Faults::default(), Faults::default());
        let store = Arc::new(MemoryReminderStore::new(8));
        let ledger = Arc::new(MemoryLedger::default());
        let router = router(App {
            store: Around::new(store.clone(), (store_faults.clone(), SingleReads)),
            ledger: Around::new(ledger.clone(), ledger_faults.clone()),
            clock,
            defaults: defaults(),
            auth,
        });
        Self {
            router,
            store,
            ledger,
            ledger_faults,
            store_faults,
        }
    }

    /// The stored reminder, as the store holds it.
    pub async fn stored(&self, id: &str) -> Option<Reminder> {
        self.store
            .get(&ReminderId::parse(id).unwrap())
            .await
            .unwrap()
    }

    /// Faults of the reminders store (and its subscriber index).
    pub fn store_faults(&self) -> &Faults {
        &self.store_faults
    }

    /// A ledger whose every read is an item this version cannot decode.
    pub fn with_corrupt_ledger() -> Self {
        let store = Arc::new(MemoryReminderStore::new(8));
        let router = router(App {
            store: store.clone(),
            ledger: CorruptLedger,
            clock: SystemClock,
            defaults: defaults(),
            auth: operator(),
        });
        Self {
            router,
            store,
            ledger: Arc::default(),
            ledger_faults: Faults::default(),
            store_faults: Faults::default(),
        }
    }

    /// A store whose subscriber index answers every query with an unreadable page.
    pub fn with_corrupt_index() -> Self {
        let store = Arc::new(MemoryReminderStore::new(8));
        let router = router(App {
            store: Around::new(store.clone(), CorruptIndex),
            ledger: Arc::new(MemoryLedger::default()),
            clock: SystemClock,
            defaults: defaults(),
            auth: operator(),
        });
        Self {
            router,
            store,
            ledger: Arc::default(),
            ledger_faults: Faults::default(),
            store_faults: Faults::default(),
        }
    }

    pub async fn put(&self, id: &str, body: Value) -> (StatusCode, Value) {
        call(
            &self.router,
            "PUT",
            &format!("/v1/reminders/{id}"),
            Some(body),
        )
        .await
    }
}

/// One request as `caller`, with these JWT `claims` (the development headers).
pub async fn call_as(
    router: &Router,
    caller: &str,
    claims: &Value,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let headers = [
        (reminders_api::caller::CALLER_HEADER, caller.to_owned()),
        (reminders_api::caller::CLAIMS_HEADER, claims.to_string()),
    ];
    call_with(router, &headers, method, uri, body).await
}

/// One request through the router; the answer's status and JSON body.
pub async fn call(
    router: &Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    call_with(router, &[], method, uri, body).await
}

/// One request with extra headers.
pub async fn call_with(
    router: &Router,
    headers: &[(&str, String)],
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let body = body.map(|v| v.to_string());
    call_raw(router, headers, method, uri, body).await
}

/// One request whose body is sent as these bytes (JSON or not).
pub async fn call_raw(
    router: &Router,
    headers: &[(&str, String)],
    method: &str,
    uri: &str,
    body: Option<String>,
) -> (StatusCode, Value) {
    let body = body.map_or_else(Body::empty, Body::from);
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json");
    for (k, v) in headers {
        request = request.header(*k, v);
    }
    let request = request.body(body).unwrap();
    let answer = router.clone().oneshot(request).await.unwrap();
    let status = answer.status();
    let bytes = axum::body::to_bytes(answer.into_body(), usize::MAX)
        .await
        .unwrap();
    let json = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("not JSON ({status}): {}", String::from_utf8_lossy(&bytes)));
    (status, json)
}

/// A ledger that answers every call with an unreadable item: the API's `500`.
pub struct CorruptLedger;

impl Ledger for CorruptLedger {
    async fn get(&self, _key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        Err(corrupt("ledger.get"))
    }
    async fn put_if(&self, _r: &DeliveryRecord, _e: Expected) -> Result<Cas, PortError> {
        Err(corrupt("ledger.put_if"))
    }
    async fn delete_if(&self, _k: &DeliveryKey, _e: Expected) -> Result<Cas, PortError> {
        Err(corrupt("ledger.delete_if"))
    }
}

fn corrupt(op: &'static str) -> PortError {
    PortError::Corrupt {
        op,
        message: "test: an item this version cannot read".into(),
    }
}

/// A hook on the in-memory store by which its subscriber index and preferences are unreadable
/// (and preferences refused): the `500`s. Its compound reads are made of its single reads, so
/// a recipient's rules are unreadable too, and so is a page of series after a cursor.
pub struct CorruptIndex;

impl Hook for CorruptIndex {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        match call {
            Call::BySubscriber { .. } => Err(corrupt("reminders.by_subscriber")),
            Call::SeriesOf { .. } | Call::SeriesAfter { .. } => Err(corrupt("series.of")),
            Call::Preferences { .. } => Err(corrupt("reminders.preferences")),
            Call::Suppression { .. } => Err(corrupt("reminders.suppression")),
            Call::PutPreferences { .. } => Err(PortError::Refused {
                op: "reminders.put_preferences",
                message: "test: access denied".into(),
            }),
            _ => Ok(()),
        }
    }

    fn splits_compound_reads(&self) -> bool {
        true
    }
}
