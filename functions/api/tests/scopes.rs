//! Each route's scope, as the template deploys it (`AuthorizationScopes` per `RouteKey`), is the
//! one the router checks: for every route, a token holding every other scope is refused (403)
//! and a token holding only the route's own is not. So the router and the template cannot
//! drift apart, and no route accepts a scope meant for another.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use axum::http::StatusCode;
use common::{body, call_as, series_body, Harness};
use reminders_api::{Auth, Identity};
use serde_json::{json, Value};
use serde_norway::Value as Yaml;

/// `(method, path)` → the scope the template's route requires (without `JwtScopePrefix`).
fn template_scopes() -> BTreeMap<(String, String), String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml");
    let text = std::fs::read_to_string(path).expect("template.yaml");
    let t: Yaml = serde_norway::from_str(&text).unwrap();
    let mut out = BTreeMap::new();
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::ApiGatewayV2::Route") {
            continue;
        }
        let key = r["Properties"]["RouteKey"].as_str().unwrap();
        let (method, path) = key.split_once(' ').unwrap();
        // `!If [JwtScoped, [!Sub "${JwtScopePrefix}<scope>"], !Ref AWS::NoValue]`
        let Yaml::Tagged(when) = &r["Properties"]["AuthorizationScopes"] else {
            panic!("{name:?} has no AuthorizationScopes !If")
        };
        let scopes = when.value[1].as_sequence().unwrap();
        assert_eq!(scopes.len(), 1, "{name:?}: one scope per route");
        let Yaml::Tagged(sub) = &scopes[0] else {
            panic!("{name:?}: the scope is a !Sub")
        };
        let scope = sub.value.as_str().unwrap();
        let scope = scope
            .strip_prefix("${JwtScopePrefix}")
            .unwrap_or_else(|| panic!("{name:?}: {scope} without the prefix"));
        out.insert((method.to_owned(), path.to_owned()), scope.to_owned());
    }
    out
}

fn trusting() -> Auth {
    Auth {
        identity: Identity::TrustHeaders,
        ..Auth::default()
    }
}

/// A request to the route that would succeed with the right scope.
fn request(method: &str, path: &str) -> (String, Option<Value>) {
    let uri = path.replace("{id}", "u-1");
    let body = match (method, path) {
        ("PUT", "/v1/reminders/{id}") => Some(body("u-1", "Pickup")),
        ("PUT", "/v1/series/{id}") => Some(series_body(
            "u-1",
            "FREQ=DAILY;BYHOUR=9",
            "2030-01-01T08:00:00Z",
            "Stand-up",
        )),
        ("PUT", "/v1/subscribers/{id}/preferences") => Some(json!({"opted_out": ["sms"]})),
        ("PUT", other) => panic!("no body for PUT {other}: add one here"),
        _ => None,
    };
    (uri, body)
}

#[tokio::test]
async fn each_route_needs_its_own_scope_and_no_other() {
    let routes = template_scopes();
    assert_eq!(routes.len(), 11, "{routes:?}");
    let all: BTreeSet<&str> = routes.values().map(String::as_str).collect();
    assert_eq!(all.len(), 4, "{all:?}");
    for ((method, path), own) in &routes {
        let (uri, body) = request(method, path);
        // Every scope but the route's own: refused, naming the one it needs.
        let others: Vec<&str> = all.iter().copied().filter(|s| s != own).collect();
        let h = Harness::with_auth(trusting());
        let claims = json!({ "scope": others.join(" ") });
        let (status, e) = call_as(&h.router, "app-a", &claims, method, &uri, body.clone()).await;
        assert_eq!(
            (status, &e["error"]["code"]),
            (StatusCode::FORBIDDEN, &json!("forbidden")),
            "{method} {path} with {others:?}: {e}"
        );
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains(own.as_str()),
            "{method} {path}: the 403 names {own}: {e}"
        );
        // Only the route's own: let through (whatever the route then answers).
        let h = Harness::with_auth(trusting());
        let claims = json!({ "scope": own });
        let (status, e) = call_as(&h.router, "app-a", &claims, method, &uri, body).await;
        assert!(
            status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED,
            "{method} {path} with only {own}: {status} {e}"
        );
        assert!(
            status.is_success() || status == StatusCode::NOT_FOUND,
            "{method} {path} with only {own}: {status} {e}"
        );
    }
}
