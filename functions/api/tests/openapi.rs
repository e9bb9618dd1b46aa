//! `openapi.yaml` against the router: every status code the document lists for an operation
//! is answered by that operation in a scenario below, and the scenarios cover exactly the
//! document (a code documented and never answered, or answered and not documented, fails).

mod common;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use common::{body, call, call_with, series_body, Harness};
use reminders::ports::reminders::OP_GET;
use reminders::ports::series::{OP_GET_SERIES, OP_SERIES_OF};
use reminders::ports::FaultPoint;
use serde_json::{json, Value};

type Triple = (String, String, u16);

/// Every (path, method, status) the document lists.
fn documented() -> BTreeSet<Triple> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("openapi.yaml beside the crate");
    let doc: serde_norway::Value = serde_norway::from_str(&text).unwrap();
    assert_eq!(doc["openapi"].as_str(), Some("3.1.0"));
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_mapping().unwrap() {
        for (method, op) in item.as_mapping().unwrap() {
            let method = method.as_str().unwrap();
            if !["get", "put", "delete", "post", "patch"].contains(&method) {
                continue;
            }
            for (status, _) in op["responses"].as_mapping().unwrap() {
                let status: u16 = status.as_str().unwrap().parse().unwrap();
                out.insert((path.as_str().unwrap().to_owned(), method.to_owned(), status));
            }
        }
    }
    out
}

type Scenario = Pin<Box<dyn Future<Output = u16>>>;

/// One scenario per documented code: the request that gets it, on a fresh harness.
fn scenario(path: &str, method: &str, status: u16) -> Option<Scenario> {
    let (p, m) = (path.to_owned(), method.to_owned());
    let rem = "/v1/reminders/{id}";
    let list = "/v1/subscribers/{id}/reminders";
    let prefs = "/v1/subscribers/{id}/preferences";
    let erase = "/v1/subscribers/{id}";
    let ser = "/v1/series/{id}";
    let ser_list = "/v1/subscribers/{id}/series";
    let go = |h: Harness, method: &'static str, uri: String, b: Option<Value>| -> Scenario {
        Box::pin(async move { call(&h.router, method, &uri, b).await.0.as_u16() })
    };
    let created = |id: &'static str| async move {
        let h = Harness::new();
        h.put(id, body("u-1", "Pickup")).await;
        h
    };
    let series_created = || async {
        let h = Harness::new();
        let (status, answer) = call(&h.router, "PUT", "/v1/series/a", Some(series())).await;
        assert_eq!(status.as_u16(), 201, "{answer}");
        h
    };
    // A series route with the store's series read failing: `corrupt` answers 500, else 503.
    let series_store_fails = |method: &'static str, uri: &'static str, corrupt: bool| -> Scenario {
        Box::pin(async move {
            let h = Harness::new();
            let b = (method == "PUT").then(series);
            match corrupt {
                true => h.store_faults().corrupt(OP_GET_SERIES, 1),
                false => h.store_faults().fail(OP_GET_SERIES, FaultPoint::Before, 1),
            }
            call(&h.router, method, uri, b).await.0.as_u16()
        })
    };
    Some(match (p.as_str(), m.as_str(), status) {
        (r, "put", 201) if r == rem => go(
            Harness::new(),
            "PUT",
            "/v1/reminders/a".into(),
            Some(body("u-1", "Pickup")),
        ),
        (r, "put", 200) if r == rem => Box::pin(async move {
            let h = created("a").await;
            h.put("a", body("u-1", "Pickup")).await.0.as_u16()
        }),
        (r, "put", 400) if r == rem => go(
            Harness::new(),
            "PUT",
            "/v1/reminders/a".into(),
            Some(json!({"subscriber_id": "u-1"})),
        ),
        (r, "put", 409) if r == rem => Box::pin(async move {
            let h = created("a").await;
            h.put("a", body("u-2", "Pickup")).await.0.as_u16()
        }),
        (r, "put", 413) if r == rem => go(
            Harness::new(),
            "PUT",
            "/v1/reminders/a".into(),
            Some(json!({"x": "y".repeat(300_000)})),
        ),
        (r, "put", 500) if r == rem => go(
            Harness::with_corrupt_ledger(),
            "PUT",
            "/v1/reminders/a".into(),
            Some(body("u-1", "Pickup")),
        ),
        (r, "put", 503) if r == rem => Box::pin(async move {
            let h = Harness::new();
            h.ledger_faults
                .fail(reminders::ports::ledger::OP_GET, FaultPoint::Before, 9);
            h.put("a", body("u-1", "Pickup")).await.0.as_u16()
        }),
        (r, "get", 200) if r == rem => Box::pin(async move {
            let h = created("a").await;
            call(&h.router, "GET", "/v1/reminders/a", None)
                .await
                .0
                .as_u16()
        }),
        (r, "get", 400) if r == rem => {
            go(Harness::new(), "GET", "/v1/reminders/a%20b".into(), None)
        }
        (r, "get", 404) if r == rem => go(Harness::new(), "GET", "/v1/reminders/a".into(), None),
        (r, "get", 500) if r == rem => Box::pin(async move {
            let h = Harness::with_corrupt_ledger();
            h.put("a", body("u-1", "Pickup")).await;
            call(&h.router, "GET", "/v1/reminders/a", None)
                .await
                .0
                .as_u16()
        }),
        (r, "get", 503) if r == rem => Box::pin(async move {
            let h = created("a").await;
            h.store_faults().fail(OP_GET, FaultPoint::Before, 1);
            call(&h.router, "GET", "/v1/reminders/a", None)
                .await
                .0
                .as_u16()
        }),
        (r, "delete", 200) if r == rem => Box::pin(async move {
            let h = created("a").await;
            call(&h.router, "DELETE", "/v1/reminders/a", None)
                .await
                .0
                .as_u16()
        }),
        (r, "delete", 400) if r == rem => go(
            Harness::new(),
            "DELETE",
            "/v1/reminders/%C3%A9".into(),
            None,
        ),
        (r, "delete", 404) if r == rem => {
            go(Harness::new(), "DELETE", "/v1/reminders/a".into(), None)
        }
        (r, "delete", 500) if r == rem => Box::pin(async move {
            let h = Harness::with_corrupt_ledger();
            h.put("a", body("u-1", "Pickup")).await;
            call(&h.router, "DELETE", "/v1/reminders/a", None)
                .await
                .0
                .as_u16()
        }),
        (r, "delete", 503) if r == rem => Box::pin(async move {
            let h = created("a").await;
            h.ledger_faults
                .fail(reminders::ports::ledger::OP_PUT, FaultPoint::Before, 9);
            call(&h.router, "DELETE", "/v1/reminders/a", None)
                .await
                .0
                .as_u16()
        }),
        (l, "get", 200) if l == list => go(
            Harness::new(),
            "GET",
            "/v1/subscribers/u-1/reminders".into(),
            None,
        ),
        (l, "get", 400) if l == list => go(
            Harness::new(),
            "GET",
            "/v1/subscribers/u-1/reminders?limit=0".into(),
            None,
        ),
        (l, "get", 500) if l == list => go(
            Harness::with_corrupt_index(),
            "GET",
            "/v1/subscribers/u-1/reminders".into(),
            None,
        ),
        (l, "get", 503) if l == list => Box::pin(async move {
            let h = Harness::new();
            h.store_faults().fail(
                reminders::ports::reminders::OP_BY_SUBSCRIBER,
                FaultPoint::Before,
                1,
            );
            call(&h.router, "GET", "/v1/subscribers/u-1/reminders", None)
                .await
                .0
                .as_u16()
        }),
        (p, "put", 200) if p == prefs => go(
            Harness::new(),
            "PUT",
            "/v1/subscribers/u-1/preferences".into(),
            Some(quiet()),
        ),
        (p, "put", 400) if p == prefs => {
            let mut bad = quiet();
            bad["quiet_hours"]["push"]["zone"] = json!("Mars/Olympus");
            go(
                Harness::new(),
                "PUT",
                "/v1/subscribers/u-1/preferences".into(),
                Some(bad),
            )
        }
        (p, "put", 413) if p == prefs => go(
            Harness::new(),
            "PUT",
            "/v1/subscribers/u-1/preferences".into(),
            Some(json!({"fallback": ["x".repeat(20_000)]})),
        ),
        (p, "put", 500) if p == prefs => go(
            Harness::with_corrupt_index(),
            "PUT",
            "/v1/subscribers/u-1/preferences".into(),
            Some(quiet()),
        ),
        (p, "put", 503) if p == prefs => Box::pin(async move {
            let h = Harness::new();
            h.store_faults().fail(
                reminders::ports::reminders::OP_PUT_PREFERENCES,
                FaultPoint::Before,
                1,
            );
            call(
                &h.router,
                "PUT",
                "/v1/subscribers/u-1/preferences",
                Some(quiet()),
            )
            .await
            .0
            .as_u16()
        }),
        (p, "get", 200) if p == prefs => Box::pin(async move {
            let h = Harness::new();
            call(
                &h.router,
                "PUT",
                "/v1/subscribers/u-1/preferences",
                Some(quiet()),
            )
            .await;
            call(&h.router, "GET", "/v1/subscribers/u-1/preferences", None)
                .await
                .0
                .as_u16()
        }),
        (p, "get", 400) if p == prefs => go(
            Harness::new(),
            "GET",
            "/v1/subscribers/u%201/preferences".into(),
            None,
        ),
        (p, "get", 404) if p == prefs => go(
            Harness::new(),
            "GET",
            "/v1/subscribers/u-1/preferences".into(),
            None,
        ),
        (p, "get", 500) if p == prefs => go(
            Harness::with_corrupt_index(),
            "GET",
            "/v1/subscribers/u-1/preferences".into(),
            None,
        ),
        (p, "get", 503) if p == prefs => Box::pin(async move {
            let h = Harness::new();
            h.store_faults().fail(
                reminders::ports::reminders::OP_PREFERENCES,
                FaultPoint::Before,
                1,
            );
            call(&h.router, "GET", "/v1/subscribers/u-1/preferences", None)
                .await
                .0
                .as_u16()
        }),
        // An id another owner holds: its PUT finds nothing to create or edit.
        ("/v1/reminders/{id}", "put", 404) => Box::pin(async move {
            let h = Harness::with_auth(trusting());
            let all = json!({"scope": "reminders/read reminders/write subscribers/preferences"});
            let mut other = caller(all.clone());
            other[0].1 = "app-b".to_owned();
            let created = call_with(
                &h.router,
                &other,
                "PUT",
                "/v1/reminders/a",
                Some(body("u-1", "x")),
            )
            .await;
            assert_eq!(created.0.as_u16(), 201, "{}", created.1);
            call_with(
                &h.router,
                &caller(all),
                "PUT",
                "/v1/reminders/a",
                Some(body("u-1", "Pickup")),
            )
            .await
            .0
            .as_u16()
        }),
        (e, "delete", 200) if e == erase => Box::pin(async move {
            let h = created("a").await;
            call(&h.router, "DELETE", "/v1/subscribers/u-1", None)
                .await
                .0
                .as_u16()
        }),
        (e, "delete", 400) if e == erase => go(
            Harness::new(),
            "DELETE",
            "/v1/subscribers/u%201".into(),
            None,
        ),
        (e, "delete", 500) if e == erase => go(
            Harness::with_corrupt_index(),
            "DELETE",
            "/v1/subscribers/u-1".into(),
            None,
        ),
        (e, "delete", 503) if e == erase => Box::pin(async move {
            let h = Harness::new();
            h.store_faults().fail(
                reminders::ports::reminders::OP_BY_SUBSCRIBER,
                FaultPoint::Before,
                1,
            );
            call(&h.router, "DELETE", "/v1/subscribers/u-1", None)
                .await
                .0
                .as_u16()
        }),
        (r, "put", 201) if r == ser => {
            go(Harness::new(), "PUT", "/v1/series/a".into(), Some(series()))
        }
        (r, "put", 200) if r == ser => Box::pin(async move {
            let h = series_created().await;
            call(&h.router, "PUT", "/v1/series/a", Some(series()))
                .await
                .0
                .as_u16()
        }),
        (r, "put", 400) if r == ser => {
            let mut bad = series();
            bad["zone"] = json!("Mars/Base");
            go(Harness::new(), "PUT", "/v1/series/a".into(), Some(bad))
        }
        // Another owner's series: its PUT finds nothing to create or edit.
        (r, "put", 404) if r == ser => Box::pin(async move {
            let h = Harness::with_auth(trusting());
            let all = json!({"scope": "reminders/read reminders/write"});
            let mut other = caller(all.clone());
            other[0].1 = "app-b".to_owned();
            let created = call_with(&h.router, &other, "PUT", "/v1/series/a", Some(series())).await;
            assert_eq!(created.0.as_u16(), 201, "{}", created.1);
            call_with(
                &h.router,
                &caller(all),
                "PUT",
                "/v1/series/a",
                Some(series()),
            )
            .await
            .0
            .as_u16()
        }),
        (r, "put", 409) if r == ser => Box::pin(async move {
            let h = series_created().await;
            let mut moved = series();
            moved["subscriber_id"] = json!("u-2");
            call(&h.router, "PUT", "/v1/series/a", Some(moved))
                .await
                .0
                .as_u16()
        }),
        (r, "put", 413) if r == ser => go(
            Harness::new(),
            "PUT",
            "/v1/series/a".into(),
            Some(json!({"x": "y".repeat(300_000)})),
        ),
        (r, "put", 500) if r == ser => series_store_fails("PUT", "/v1/series/a", true),
        (r, "put", 503) if r == ser => series_store_fails("PUT", "/v1/series/a", false),
        (r, "get", 200) if r == ser => Box::pin(async move {
            let h = series_created().await;
            call(&h.router, "GET", "/v1/series/a", None)
                .await
                .0
                .as_u16()
        }),
        (r, "get", 400) if r == ser => go(Harness::new(), "GET", "/v1/series/a%20b".into(), None),
        (r, "get", 404) if r == ser => go(Harness::new(), "GET", "/v1/series/a".into(), None),
        (r, "get", 500) if r == ser => series_store_fails("GET", "/v1/series/a", true),
        (r, "get", 503) if r == ser => series_store_fails("GET", "/v1/series/a", false),
        (r, "delete", 200) if r == ser => Box::pin(async move {
            let h = series_created().await;
            call(&h.router, "DELETE", "/v1/series/a", None)
                .await
                .0
                .as_u16()
        }),
        (r, "delete", 400) if r == ser => {
            go(Harness::new(), "DELETE", "/v1/series/%C3%A9".into(), None)
        }
        (r, "delete", 404) if r == ser => go(Harness::new(), "DELETE", "/v1/series/a".into(), None),
        (r, "delete", 500) if r == ser => series_store_fails("DELETE", "/v1/series/a", true),
        (r, "delete", 503) if r == ser => series_store_fails("DELETE", "/v1/series/a", false),
        (l, "get", 200) if l == ser_list => Box::pin(async move {
            let h = series_created().await;
            let (status, page) = call(&h.router, "GET", "/v1/subscribers/u-1/series", None).await;
            assert_eq!(page["series"][0]["series_id"], "a", "{page}");
            status.as_u16()
        }),
        (l, "get", 400) if l == ser_list => go(
            Harness::new(),
            "GET",
            "/v1/subscribers/u-1/series?cursor=a%20b".into(),
            None,
        ),
        (l, "get", 500) if l == ser_list => go(
            Harness::with_corrupt_index(),
            "GET",
            "/v1/subscribers/u-1/series".into(),
            None,
        ),
        (l, "get", 503) if l == ser_list => Box::pin(async move {
            let h = Harness::new();
            h.store_faults().fail(OP_SERIES_OF, FaultPoint::Before, 1);
            call(&h.router, "GET", "/v1/subscribers/u-1/series", None)
                .await
                .0
                .as_u16()
        }),
        // Authorization, on every route, as `remindctl local api --trust-identity-header`.
        (_, _, 401 | 403) if operation(&p, &m) => {
            let uri = sample(&p);
            let method = verb(&m);
            Box::pin(async move {
                let h = Harness::with_auth(trusting());
                let b = (method == "PUT").then(|| sample_body(&uri));
                let headers = match status {
                    401 => vec![],
                    _ => caller(json!({})),
                };
                call_with(&h.router, &headers, method, &uri, b)
                    .await
                    .0
                    .as_u16()
            })
        }
        // An end user's token for another subscriber.
        (l, "get", 404) | (l, "put", 404) | (l, "delete", 404)
            if ((l == list || l == ser_list) && m == "get")
                || (l == prefs && m == "put")
                || (l == erase && m == "delete") =>
        {
            let uri = sample(&p);
            let method = verb(&m);
            Box::pin(async move {
                let h = Harness::with_auth(trusting());
                let user = json!({"scope": "reminders/read subscribers/preferences subscribers/erase", "sub_id": "u-2"});
                let b = (method == "PUT").then(|| sample_body(&uri));
                call_with(&h.router, &caller(user), method, &uri, b)
                    .await
                    .0
                    .as_u16()
            })
        }
        _ => return None,
    })
}

/// The API's eleven operations.
fn operation(path: &str, method: &str) -> bool {
    matches!(
        (path, method),
        ("/v1/reminders/{id}", "get" | "put" | "delete")
            | ("/v1/subscribers/{id}/reminders", "get")
            | ("/v1/subscribers/{id}/preferences", "get" | "put")
            | ("/v1/subscribers/{id}", "delete")
            | ("/v1/series/{id}", "get" | "put" | "delete")
            | ("/v1/subscribers/{id}/series", "get")
    )
}

/// The development headers' settings, with `sub_id` as the end users' claim.
fn trusting() -> reminders_api::Auth {
    reminders_api::Auth {
        identity: reminders_api::Identity::TrustHeaders,
        subscriber_claim: Some("sub_id".into()),
        ..reminders_api::Auth::default()
    }
}

fn caller(claims: Value) -> Vec<(&'static str, String)> {
    vec![
        (reminders_api::caller::CALLER_HEADER, "app-a".to_owned()),
        (reminders_api::caller::CLAIMS_HEADER, claims.to_string()),
    ]
}

/// The path with `u-1` or `a` for its id.
fn sample(path: &str) -> String {
    if path.starts_with("/v1/subscribers/") {
        path.replace("{id}", "u-1")
    } else {
        path.replace("{id}", "a")
    }
}

fn sample_body(uri: &str) -> Value {
    if uri.ends_with("/preferences") {
        quiet()
    } else if uri.starts_with("/v1/series/") {
        series()
    } else {
        body("u-1", "Pickup")
    }
}

/// A valid series body: daily at 09:15 in Paris from 2030 (nothing made now).
fn series() -> Value {
    series_body(
        "u-1",
        "FREQ=DAILY;BYHOUR=9;BYMINUTE=15",
        "2030-01-01T00:00:00Z",
        "Standup",
    )
}

fn verb(method: &str) -> &'static str {
    match method {
        "get" => "GET",
        "put" => "PUT",
        "delete" => "DELETE",
        other => panic!("{other}"),
    }
}

fn quiet() -> Value {
    json!({"opted_out": ["sms"], "quiet_hours": {"push": {"start": "22:00", "end": "07:00", "zone": "Europe/Paris"}}, "fallback": ["push", "email"]})
}

#[tokio::test]
async fn every_status_code_the_document_lists_is_answered() {
    let documented = documented();
    assert!(documented.len() >= 60, "{documented:?}");
    for (path, method, status) in &documented {
        let run = scenario(path, method, *status).unwrap_or_else(|| {
            panic!("{method} {path} documents {status}: no scenario answers it")
        });
        assert_eq!(run.await, *status, "{method} {path}");
    }
}

/// The other way round: a scenario for a code the document does not list is a code the API
/// answers undocumented.
#[test]
fn the_document_lists_every_code_a_scenario_answers() {
    let documented = documented();
    let paths = [
        "/v1/reminders/{id}",
        "/v1/subscribers/{id}/reminders",
        "/v1/subscribers/{id}/preferences",
        "/v1/subscribers/{id}",
        "/v1/series/{id}",
        "/v1/subscribers/{id}/series",
    ];
    for path in paths {
        for method in ["get", "put", "delete"] {
            for status in [200, 201, 400, 401, 403, 404, 409, 413, 500, 503] {
                if scenario(path, method, status).is_some() {
                    let t = (path.to_owned(), method.to_owned(), status);
                    assert!(
                        documented.contains(&t),
                        "{method} {path} answers {status}, undocumented"
                    );
                }
            }
        }
    }
}

/// The document's `ReminderOutcome` names exactly the outcomes the code gives, in its order.
#[test]
fn the_documented_outcomes_are_the_codes() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("openapi.yaml beside the crate");
    let doc: serde_norway::Value = serde_norway::from_str(&text).unwrap();
    let documented: Vec<&str> = doc["components"]["schemas"]["ReminderOutcome"]["enum"]
        .as_sequence()
        .expect("a ReminderOutcome enum")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let code: Vec<&str> = reminders::delivery::outcome::ReminderOutcome::ALL
        .iter()
        .map(|o| o.as_str())
        .collect();
    assert_eq!(documented, code);
}
