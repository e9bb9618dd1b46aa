//! The router on in-memory ports, and one call through it as an HTTP request.

#![allow(dead_code)]

pub mod standup;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use reminders::clock::Timestamp;
use reminders::clock::{ManualClock, SystemClock};
use reminders::domain::{DeliveryKey, Retention};
use reminders::domain::{Reminder, ReminderId, ReminderStatus, SubscriberId};
use reminders::ledger::DeliveryRecord;
use reminders::ports::{
    Cas, DuePage, DueQuery, Expected, Faults, Inserted, Ledger, Marked, MemoryLedger,
    MemoryReminderStore, PortError, ReminderStore, SubscriberCursor, SubscriberIndex,
    SubscriberPage, SweepCursor, SweepPage,
};
use reminders_api::{router, App, Defaults};
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
        let store = Arc::new(MemoryReminderStore::with_faults(8, store_faults.clone()));
        let ledger = Arc::new(MemoryLedger::with_faults(ledger_faults.clone()));
        let router = router(App {
            store: store.clone(),
            ledger: ledger.clone(),
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
        let store = Arc::new(MemoryReminderStore::with_faults(8, store_faults.clone()));
        let ledger = Arc::new(MemoryLedger::with_faults(ledger_faults.clone()));
        let router = router(App {
            store: store.clone(),
            ledger: ledger.clone(),
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
            store: CorruptIndex(store.clone()),
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

/// The in-memory store, except that its subscriber index and preferences are unreadable
/// (and preferences refused): the `500`s.
pub struct CorruptIndex(pub Arc<MemoryReminderStore>);

/// Erasure reads the index first, which fails: nothing below is reached.
impl reminders::ports::Eraser for CorruptIndex {
    async fn delete_reminder(
        &self,
        id: &ReminderId,
        force: bool,
    ) -> Result<reminders::ports::Deleted, PortError> {
        reminders::ports::Eraser::delete_reminder(&self.0, id, force).await
    }
    async fn delete_preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> Result<reminders::ports::Deleted, PortError> {
        reminders::ports::Eraser::delete_preferences(&self.0, subscriber).await
    }
    async fn lift_suppression(
        &self,
        address: &reminders::domain::AddressHash,
    ) -> Result<reminders::ports::Deleted, PortError> {
        reminders::ports::Eraser::lift_suppression(&self.0, address).await
    }
}

/// Series as the store keeps them, except a subscriber's list (an index), which is unreadable.
impl reminders::ports::SeriesStore for CorruptIndex {
    async fn get_series(
        &self,
        id: &reminders::domain::SeriesId,
    ) -> Result<Option<reminders::domain::series::Series>, PortError> {
        reminders::ports::SeriesStore::get_series(&self.0, id).await
    }
    async fn put_series(
        &self,
        s: &reminders::domain::series::Series,
        expected: reminders::ports::ExpectedSeries,
    ) -> Result<reminders::ports::series::Written, PortError> {
        reminders::ports::SeriesStore::put_series(&self.0, s, expected).await
    }
    async fn series_due(
        &self,
        until: reminders::clock::Timestamp,
        limit: u32,
    ) -> Result<Vec<reminders::domain::series::Series>, PortError> {
        reminders::ports::SeriesStore::series_due(&self.0, until, limit).await
    }
    async fn series_of(
        &self,
        _s: &SubscriberId,
        _after: Option<&reminders::domain::SeriesId>,
        _limit: u32,
    ) -> Result<reminders::ports::SeriesPage, PortError> {
        Err(corrupt("series.of"))
    }
}

impl SubscriberIndex for CorruptIndex {
    async fn by_subscriber(
        &self,
        _s: &SubscriberId,
        _after: Option<&SubscriberCursor>,
        _limit: u32,
    ) -> Result<SubscriberPage, PortError> {
        Err(corrupt("reminders.by_subscriber"))
    }
}

impl ReminderStore for CorruptIndex {
    fn shards(&self) -> u32 {
        self.0.shards()
    }
    async fn preferences(
        &self,
        _s: &SubscriberId,
    ) -> Result<Option<reminders::domain::Preferences>, PortError> {
        Err(corrupt("reminders.preferences"))
    }
    async fn put_preferences(
        &self,
        _s: &SubscriberId,
        _p: &reminders::domain::Preferences,
    ) -> Result<(), PortError> {
        Err(PortError::Refused {
            op: "reminders.put_preferences",
            message: "test: access denied".into(),
        })
    }
    async fn suppression(
        &self,
        _a: &reminders::domain::AddressHash,
    ) -> Result<Option<reminders::domain::Suppression>, PortError> {
        Err(corrupt("reminders.suppression"))
    }
    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        self.0.insert(r).await
    }
    async fn replace(&self, r: &Reminder, v: u64, s: ReminderStatus) -> Result<Marked, PortError> {
        self.0.replace(r, v, s).await
    }
    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        self.0.get(id).await
    }
    async fn query_due(&self, q: &DueQuery<'_>) -> Result<DuePage, PortError> {
        self.0.query_due(q).await
    }
    async fn extend_freshness(
        &self,
        id: &ReminderId,
        v: u64,
        f: Timestamp,
        e: i64,
    ) -> Result<Marked, PortError> {
        self.0.extend_freshness(id, v, f, e).await
    }
    async fn sweep_index(&self, a: Option<&SweepCursor>, l: u32) -> Result<SweepPage, PortError> {
        self.0.sweep_index(a, l).await
    }
    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        self.0.quarantine(key, reason).await
    }
    async fn mark(&self, id: &ReminderId, v: u64, to: ReminderStatus) -> Result<Marked, PortError> {
        self.0.mark(id, v, to).await
    }
}
