//! The router on in-memory ports, and one call through it as an HTTP request.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use reminders::clock::SystemClock;
use reminders::delivery::state::DeliveryRecord;
use reminders::domain::{DeliveryKey, Retention};
use reminders::ports::{
    Cas, Expected, Faults, Ledger, MemoryLedger, MemoryReminderStore, PortError,
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

pub fn defaults() -> Defaults {
    Defaults {
        freshness: Duration::from_secs(3600),
        retention: Retention::default(),
    }
}

#[derive(Clone)]
pub struct Harness {
    pub router: Router,
    pub store: Arc<MemoryReminderStore>,
    pub ledger_faults: Faults,
}

impl Harness {
    pub fn new() -> Self {
        let ledger_faults = Faults::default();
        let store = Arc::new(MemoryReminderStore::new(8));
        let ledger = Arc::new(MemoryLedger::with_faults(ledger_faults.clone()));
        let router = router(App {
            store: store.clone(),
            ledger,
            clock: SystemClock,
            defaults: defaults(),
        });
        Self {
            router,
            store,
            ledger_faults,
        }
    }

    /// A ledger whose every read is an item this version cannot decode.
    pub fn with_corrupt_ledger() -> Self {
        let store = Arc::new(MemoryReminderStore::new(8));
        let router = router(App {
            store: store.clone(),
            ledger: CorruptLedger,
            clock: SystemClock,
            defaults: defaults(),
        });
        Self {
            router,
            store,
            ledger_faults: Faults::default(),
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

/// One request through the router; the answer's status and JSON body.
pub async fn call(
    router: &Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let body = match body {
        Some(v) => Body::from(v.to_string()),
        None => Body::empty(),
    };
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let answer = router.clone().oneshot(request).await.unwrap();
    let status = answer.status();
    let bytes = axum::body::to_bytes(answer.into_body(), usize::MAX)
        .await
        .unwrap();
    let json = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("not JSON ({status}): {}", String::from_utf8_lossy(&bytes)));
    (status, json)
}

/// A ledger that answers every read with an unreadable item: the API's `500`.
pub struct CorruptLedger;

impl Ledger for CorruptLedger {
    async fn get(&self, _key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        Err(PortError::Corrupt {
            op: "ledger.get",
            message: "test: an item this version cannot read".into(),
        })
    }
    async fn put_if(&self, _r: &DeliveryRecord, _e: Expected) -> Result<Cas, PortError> {
        Ok(Cas::Applied)
    }
}
