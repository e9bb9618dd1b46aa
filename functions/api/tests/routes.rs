//! One set of routes: what the router serves, what the template deploys on API Gateway, and
//! what `openapi.yaml` documents are the same `(method, path)` pairs. A route in one and not
//! in another fails (API Gateway answers its own 404 for a route the template leaves out).

mod common;

use std::collections::BTreeSet;

use axum::http::StatusCode;
use common::{call, Harness};

type Route = (String, String);

fn yaml(path: &str) -> serde_norway::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_norway::from_str(&text).unwrap()
}

/// `RouteKey` of every `AWS::ApiGatewayV2::Route` in the template.
fn deployed() -> BTreeSet<Route> {
    let t = yaml(concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml"));
    t["Resources"]
        .as_mapping()
        .unwrap()
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::ApiGatewayV2::Route"))
        .map(|r| {
            let key = r["Properties"]["RouteKey"].as_str().unwrap();
            let (m, p) = key.split_once(' ').unwrap();
            (m.to_owned(), p.to_owned())
        })
        .collect()
}

fn documented() -> BTreeSet<Route> {
    let doc = yaml(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"));
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_mapping().unwrap() {
        for (method, _) in item.as_mapping().unwrap() {
            let m = method.as_str().unwrap();
            if ["get", "put", "delete", "post", "patch"].contains(&m) {
                out.insert((m.to_uppercase(), path.as_str().unwrap().to_owned()));
            }
        }
    }
    out
}

/// What the router serves, of every method on every path either document names: a request
/// it does not route answers `not_found` (no such route) or `method_not_allowed`.
async fn served(paths: &BTreeSet<String>) -> BTreeSet<Route> {
    let h = Harness::new();
    let mut out = BTreeSet::new();
    for path in paths {
        let uri = path.replace("{id}", "u-1");
        for method in ["GET", "PUT", "DELETE", "POST", "PATCH"] {
            let (status, body) = call(&h.router, method, &uri, None).await;
            let unrouted = status == StatusCode::METHOD_NOT_ALLOWED
                || (status == StatusCode::NOT_FOUND
                    && body["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("no such route")));
            if !unrouted {
                out.insert((method.to_owned(), path.clone()));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_router_the_template_and_openapi_have_one_set_of_routes() {
    let (deployed, documented) = (deployed(), documented());
    let paths: BTreeSet<String> = deployed
        .iter()
        .chain(&documented)
        .map(|(_, p)| p.clone())
        .collect();
    let served = served(&paths).await;
    assert!(served.len() >= 6, "{served:?}");
    assert_eq!(deployed, documented, "template vs openapi.yaml");
    assert_eq!(served, documented, "router vs openapi.yaml");
}

/// The check can fail: a route the template lacks is found.
#[tokio::test]
async fn a_route_missing_from_one_set_is_found() {
    let mut deployed = deployed();
    deployed.remove(&(
        "PUT".to_owned(),
        "/v1/subscribers/{id}/preferences".to_owned(),
    ));
    assert_ne!(deployed, documented());
    let paths = BTreeSet::from(["/v1/nowhere/{id}".to_owned()]);
    assert!(
        served(&paths).await.is_empty(),
        "an unknown path is not served"
    );
}
