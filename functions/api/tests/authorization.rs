//! Who may do what, through the real router with the development identity headers
//! (`remindctl local api --trust-identity-header`): owner isolation, each route's scope, an end
//! user's token, and a request with no identity at all.

mod common;

use axum::http::StatusCode;
use common::{body, call_as, call_with, Harness};
use reminders::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};
use reminders::ports::{Ledger, SubscriberCursor};
use reminders_api::{Auth, Identity};
use serde_json::{json, Value};

fn trusting() -> Auth {
    Auth {
        identity: Identity::TrustHeaders,
        subscriber_claim: Some("custom:subscriber".into()),
        ..Auth::default()
    }
}

/// Every scope an application holds.
fn app_claims() -> Value {
    json!({"scope": "reminders/read reminders/write subscribers/preferences"})
}

#[tokio::test]
async fn another_owner_finds_nothing_and_changes_nothing() {
    let h = Harness::with_auth(trusting());
    let r = &h.router;
    let claims = app_claims();
    let (status, created) = call_as(
        r,
        "app-a",
        &claims,
        "PUT",
        "/v1/reminders/r-a",
        Some(body("u-1", "Pickup")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let before = h.stored("r-a").await.unwrap();
    assert_eq!(before.owner.as_ref().map(|o| o.as_str()), Some("app-a"));

    // B: GET, an edit that would send the reminder to B, DELETE, and the list: 404 each.
    let (status, got) = call_as(r, "app-b", &claims, "GET", "/v1/reminders/r-a", None).await;
    assert_eq!(
        (status, &got["error"]["code"]),
        (StatusCode::NOT_FOUND, &json!("not_found"))
    );
    let mut hijack = body("u-1", "Pickup");
    hijack["channels"] = json!({"email": "attacker@example.org"});
    let (status, put) = call_as(
        r,
        "app-b",
        &claims,
        "PUT",
        "/v1/reminders/r-a",
        Some(hijack),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{put}");
    let (status, _) = call_as(r, "app-b", &claims, "DELETE", "/v1/reminders/r-a", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, list) = call_as(
        r,
        "app-b",
        &claims,
        "GET",
        "/v1/subscribers/u-1/reminders",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["reminders"], json!([]), "{list}");
    assert_eq!(list["next_cursor"], Value::Null, "{list}");
    assert_eq!(h.stored("r-a").await.unwrap(), before, "nothing changed");
    for channel in [Channel::Email, Channel::Sms] {
        let key = DeliveryKey::derive(
            &ReminderId::parse("r-a").unwrap(),
            &SubscriberId::parse("u-1").unwrap(),
            channel,
        );
        assert_eq!(
            h.ledger.get(&key).await.unwrap(),
            None,
            "B's DELETE wrote nothing to the ledger ({channel:?})"
        );
    }

    // A still reaches it all.
    let (status, list) = call_as(
        r,
        "app-a",
        &claims,
        "GET",
        "/v1/subscribers/u-1/reminders",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["reminders"].as_array().unwrap().len(), 1, "{list}");
    let (status, cancel) = call_as(r, "app-a", &claims, "DELETE", "/v1/reminders/r-a", None).await;
    assert_eq!(
        (status, &cancel["status"]),
        (StatusCode::OK, &json!("cancelled"))
    );
}

#[tokio::test]
async fn a_missing_scope_is_forbidden_and_writes_nothing() {
    let h = Harness::with_auth(trusting());
    let r = &h.router;
    let read_only = json!({"scope": "reminders/read"});
    let (status, e) = call_as(
        r,
        "app-a",
        &read_only,
        "PUT",
        "/v1/reminders/r-s",
        Some(body("u-1", "x")),
    )
    .await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (StatusCode::FORBIDDEN, &json!("forbidden"))
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("reminders/write"),
        "{e}"
    );
    assert!(h.stored("r-s").await.is_none(), "nothing created");
    let (status, _) = call_as(
        r,
        "app-a",
        &read_only,
        "PUT",
        "/v1/subscribers/u-1/preferences",
        Some(json!({"opted_out": ["sms"]})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let none = json!({});
    for (method, uri) in [
        ("GET", "/v1/reminders/r-s"),
        ("DELETE", "/v1/reminders/r-s"),
        ("GET", "/v1/subscribers/u-1/reminders"),
        ("GET", "/v1/subscribers/u-1/preferences"),
    ] {
        let (status, e) = call_as(r, "app-a", &none, method, uri, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}: {e}");
    }
    // A prefix, as a Cognito resource server names its scopes.
    let prefixed = Harness::with_auth(Auth {
        scope_prefix: "https://api.example.com/".into(),
        ..trusting()
    });
    let (status, _) = call_as(
        &prefixed.router,
        "app-a",
        &read_only,
        "GET",
        "/v1/subscribers/u-1/reminders",
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "the bare name is not the prefixed scope"
    );
    let full = json!({"scope": "https://api.example.com/reminders/read"});
    let (status, _) = call_as(
        &prefixed.router,
        "app-a",
        &full,
        "GET",
        "/v1/subscribers/u-1/reminders",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn an_end_users_token_reaches_only_its_subscriber() {
    let h = Harness::with_auth(trusting());
    let r = &h.router;
    let app = app_claims();
    for (id, sub) in [("r-1", "u-1"), ("r-2", "u-2")] {
        let (status, _) = call_as(
            r,
            "backend",
            &app,
            "PUT",
            &format!("/v1/reminders/{id}"),
            Some(body(sub, "x")),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, _) = call_as(
        r,
        "backend",
        &app,
        "PUT",
        "/v1/subscribers/u-2/preferences",
        Some(json!({"opted_out": ["push"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "u-2's preferences exist");
    let user = json!({"scope": "reminders/read subscribers/preferences reminders/write", "custom:subscriber": "u-1"});
    // Its own, whoever created them.
    let (status, list) = call_as(
        r,
        "mobile",
        &user,
        "GET",
        "/v1/subscribers/u-1/reminders",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["reminders"].as_array().unwrap().len(), 1, "{list}");
    let (status, _) = call_as(r, "mobile", &user, "GET", "/v1/reminders/r-1", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call_as(
        r,
        "mobile",
        &user,
        "PUT",
        "/v1/subscribers/u-1/preferences",
        Some(json!({"opted_out": ["sms"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // Nobody else's, and no reminder writes even of its own.
    for (method, uri) in [
        ("GET", "/v1/reminders/r-2"),
        ("GET", "/v1/subscribers/u-2/reminders"),
        ("GET", "/v1/subscribers/u-2/preferences"),
    ] {
        let (status, e) = call_as(r, "mobile", &user, method, uri, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {uri}: {e}");
    }
    let (status, _) = call_as(
        r,
        "mobile",
        &user,
        "PUT",
        "/v1/subscribers/u-2/preferences",
        Some(json!({"opted_out": ["sms"]})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, prefs) = call_as(
        r,
        "backend",
        &app,
        "GET",
        "/v1/subscribers/u-2/preferences",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        prefs["opted_out"],
        json!(["push"]),
        "u-2's preferences unchanged: {prefs}"
    );
    let (status, _) = call_as(r, "mobile", &user, "DELETE", "/v1/reminders/r-1", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = call_as(
        r,
        "mobile",
        &user,
        "PUT",
        "/v1/reminders/r-3",
        Some(body("u-1", "x")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(h.stored("r-3").await.is_none());
    assert_eq!(h.stored("r-1").await.unwrap().status.as_str(), "scheduled");
}

#[tokio::test]
async fn trusting_headers_a_call_without_them_is_unauthorized() {
    let h = Harness::with_auth(trusting());
    let (status, e) = call_with(&h.router, &[], "GET", "/v1/subscribers/u-1/reminders", None).await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (StatusCode::UNAUTHORIZED, &json!("unauthorized"))
    );
    let bad = [
        (reminders_api::caller::CALLER_HEADER, "app-a".to_owned()),
        (reminders_api::caller::CLAIMS_HEADER, "not json".to_owned()),
    ];
    let (status, _) = call_with(
        &h.router,
        &bad,
        "GET",
        "/v1/subscribers/u-1/reminders",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn with_isolation_off_every_caller_reaches_every_reminder() {
    let h = Harness::with_auth(Auth {
        owner_isolation: false,
        ..trusting()
    });
    let r = &h.router;
    let claims = app_claims();
    call_as(
        r,
        "app-a",
        &claims,
        "PUT",
        "/v1/reminders/r-o",
        Some(body("u-1", "x")),
    )
    .await;
    let (status, _) = call_as(r, "app-b", &claims, "GET", "/v1/reminders/r-o", None).await;
    assert_eq!(status, StatusCode::OK);
}

/// A subscriber's list holds every application's reminders: each page shows only the
/// caller's, and its cursor names only the caller's (never another owner's id or due time).
#[tokio::test]
async fn a_page_and_its_cursor_name_only_what_the_caller_reaches() {
    let h = Harness::with_auth(trusting());
    let r = &h.router;
    let claims = app_claims();
    // Interleaved due times, newest first: b-5, a-4, b-3, b-2, a-1, b-0.
    for (who, id, minute) in [
        ("app-b", "b-0", 0),
        ("app-a", "a-1", 1),
        ("app-b", "b-2", 2),
        ("app-b", "b-3", 3),
        ("app-a", "a-4", 4),
        ("app-b", "b-5", 5),
    ] {
        let mut b = body("u-1", "x");
        b["due_at"] = json!(format!("2030-01-01T10:0{minute}:00Z"));
        let (status, e) = call_as(
            r,
            who,
            &claims,
            "PUT",
            &format!("/v1/reminders/{id}"),
            Some(b),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{e}");
    }
    let mut seen = Vec::new();
    let mut uri = "/v1/subscribers/u-1/reminders?limit=1".to_owned();
    for _ in 0..5 {
        let (status, page) = call_as(r, "app-a", &claims, "GET", &uri, None).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for item in page["reminders"].as_array().unwrap() {
            seen.push(item["reminder_id"].as_str().unwrap().to_owned());
        }
        let Some(cursor) = page["next_cursor"].as_str() else {
            break;
        };
        // Sealed by this process's own key (the harness names no suppression key).
        // Sealed for this list and this caller (an owner, as the trusting harness names it).
        let context = "reminders\0u-1\0app-a";
        let opened = reminders::domain::CursorSeal::process_local()
            .open(context, cursor)
            .expect("a cursor this API sealed for this list and caller");
        let decoded = SubscriberCursor::decode(&opened).unwrap();
        assert!(
            decoded.reminder_id.starts_with("a-"),
            "the cursor names another owner's reminder: {decoded:?}"
        );
        uri = format!("/v1/subscribers/u-1/reminders?limit=1&cursor={cursor}");
    }
    assert_eq!(
        seen,
        ["a-4", "a-1"],
        "each of A's once, newest first, nothing else"
    );
    // A full page at once: both, and no cursor (nothing of A's is left).
    let (_, page) = call_as(
        r,
        "app-a",
        &claims,
        "GET",
        "/v1/subscribers/u-1/reminders?limit=2",
        None,
    )
    .await;
    assert_eq!(page["reminders"].as_array().unwrap().len(), 2, "{page}");
    assert_eq!(page["next_cursor"], Value::Null, "{page}");
}

/// A reminder with no owner (the library's, `remindctl remind create`'s, or one written
/// before owners were stored) is an operator's: no application reads, edits or cancels it.
#[tokio::test]
async fn an_unowned_reminder_is_reachable_by_no_application() {
    let h = Harness::with_auth(trusting());
    let operator = reminders_api::router(reminders_api::App {
        store: h.store.clone(),
        ledger: h.ledger.clone(),
        clock: reminders::clock::SystemClock,
        defaults: common::defaults(),
        auth: common::operator(),
    });
    let (status, e) = common::call(
        &operator,
        "PUT",
        "/v1/reminders/r-u",
        Some(body("u-1", "x")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{e}");
    let before = h.stored("r-u").await.unwrap();
    assert_eq!(before.owner, None);
    let claims = app_claims();
    let mut hijack = body("u-1", "x");
    hijack["channels"] = json!({"email": "attacker@example.org"});
    for (method, body) in [("GET", None), ("PUT", Some(hijack)), ("DELETE", None)] {
        let (status, e) = call_as(
            &h.router,
            "app-a",
            &claims,
            method,
            "/v1/reminders/r-u",
            body,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method}: {e}");
    }
    let (_, list) = call_as(
        &h.router,
        "app-a",
        &claims,
        "GET",
        "/v1/subscribers/u-1/reminders",
        None,
    )
    .await;
    assert_eq!(list["reminders"], json!([]), "{list}");
    assert_eq!(h.stored("r-u").await.unwrap(), before, "nothing changed");
    let (status, _) = common::call(&operator, "GET", "/v1/reminders/r-u", None).await;
    assert_eq!(status, StatusCode::OK, "the operator still reaches it");
}

/// Another application's series of the same subscriber: the lister sees none of them, and the
/// page's cursor, which ends on one of them, reveals nothing of it (not its id, not its start);
/// one altered or made up is refused naming `cursor`.
#[tokio::test]
async fn a_series_list_cursor_reveals_nothing_of_another_owners_series() {
    use base64::Engine;
    let h = Harness::with_auth(trusting());
    let r = &h.router;
    let claims = app_claims();
    for id in ["insulin-u1", "walk-u1", "water-u1"] {
        let b = common::series_body("u1", "FREQ=DAILY;BYHOUR=9", "2030-01-01T08:00:00Z", "x");
        let (status, e) = call_as(
            r,
            "app-a",
            &claims,
            "PUT",
            &format!("/v1/series/{id}"),
            Some(b),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{e}");
    }
    let uri = "/v1/subscribers/u1/series?limit=1";
    let (status, page) = call_as(r, "app-b", &claims, "GET", uri, None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["series"], json!([]), "{page}");
    let cursor = page["next_cursor"]
        .as_str()
        .expect("more to list")
        .to_owned();
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&cursor)
        .unwrap_or_default();
    // Neither its bytes nor what they would decode to, were they base64 under a tag, show it.
    let inner = raw
        .get(16..)
        .and_then(|b| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(b)
                .ok()
        })
        .unwrap_or_default();
    for shown in [
        String::from_utf8_lossy(&raw),
        String::from_utf8_lossy(&inner),
    ] {
        for secret in ["insulin", "walk", "water", "1893484800000"] {
            assert!(
                !shown.contains(secret),
                "the cursor shows {secret}: {shown}"
            );
            assert!(!cursor.contains(secret), "{cursor}");
        }
    }
    // Replayed on another subscriber's list, it is refused.
    let other = format!("/v1/subscribers/u2/series?limit=1&cursor={cursor}");
    let (status, e) = call_as(r, "app-b", &claims, "GET", &other, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    // It still pages on, for the caller, to the end.
    let next = format!("{uri}&cursor={cursor}");
    let (status, page) = call_as(r, "app-b", &claims, "GET", &next, None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["series"], json!([]), "{page}");
    // Tampered with, or the old unsealed form naming a series: refused, naming the field.
    let mut flipped = raw.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let unsealed =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"[1893484800000,"insulin-u1"]"#);
    for bad in [
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&flipped),
        unsealed,
    ] {
        let (status, e) = call_as(
            r,
            "app-b",
            &claims,
            "GET",
            &format!("{uri}&cursor={bad}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
        assert_eq!(e["error"]["field"], "cursor", "{e}");
    }
}
