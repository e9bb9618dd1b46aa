//! Who may do what, through the real router with the development identity headers
//! (`remindctl local api --trust-identity-header`): owner isolation, each route's scope, an end
//! user's token, and a request with no identity at all.

mod common;

use axum::http::StatusCode;
use common::{body, call_as, call_with, Harness};
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
    assert_eq!(h.stored("r-a").await.unwrap(), before, "nothing changed");

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
