//! One set of routes: what the router serves, what the template deploys on API Gateway, and
//! what `openapi.yaml` documents are the same `(method, path)` pairs. A route in one and not
//! in another fails (API Gateway answers its own 404 for a route the template leaves out).
//! The router is probed on every path the two documents name and on every path its own source
//! declares (the `.route("…")` literals), so a route on a path only the router knows is found.

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

/// The paths the router's source declares: the literal of every `.route(` under src/. A route
/// whose path is not a literal (a constant, a `.nest`, a `.merge`) would hide from the probe,
/// so it is refused here, by name.
fn declared(sources: &[(String, String)]) -> Result<BTreeSet<String>, String> {
    let mut out = BTreeSet::new();
    for (file, text) in sources {
        for hidden in [".nest(", ".merge(", ".route_service(", ".nest_service("] {
            if text.contains(hidden) {
                return Err(format!("{file}: {hidden} hides its paths from this test"));
            }
        }
        for (at, _) in text.match_indices(".route(") {
            let rest = text[at + ".route(".len()..].trim_start();
            let literal = rest
                .strip_prefix('"')
                .and_then(|r| r.split_once('"'))
                .map(|(path, _)| path.to_owned())
                .ok_or_else(|| format!("{file}: a .route( whose path is not a literal"))?;
            out.insert(literal);
        }
    }
    Ok(out)
}

/// The API crate's sources, as (file, text).
fn sources() -> Vec<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path.display().to_string(), text));
        }
    }
    assert!(!out.is_empty(), "no sources under {dir}");
    out
}

/// What the router serves, of every method on every path either document names: a request
/// it does not route answers `not_found` (no such route) or `method_not_allowed`.
async fn served(paths: &BTreeSet<String>) -> BTreeSet<Route> {
    served_by(&Harness::new().router, paths).await
}

async fn served_by(router: &axum::Router, paths: &BTreeSet<String>) -> BTreeSet<Route> {
    let mut out = BTreeSet::new();
    for path in paths {
        let uri = path.replace("{id}", "u-1");
        for method in ["GET", "PUT", "DELETE", "POST", "PATCH"] {
            let (status, body) = call(router, method, &uri, None).await;
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

/// The three sets agree, the router probed on the documents' paths and its source's.
async fn one_set(
    router: &axum::Router,
    sources: &[(String, String)],
    deployed: &BTreeSet<Route>,
    documented: &BTreeSet<Route>,
) -> Result<(), String> {
    let paths: BTreeSet<String> = deployed
        .iter()
        .chain(documented)
        .map(|(_, p)| p.clone())
        .chain(declared(sources)?)
        .collect();
    let served = served_by(router, &paths).await;
    if deployed != documented {
        return Err(format!(
            "template vs openapi.yaml: {:?} only deployed, {:?} only documented",
            deployed.difference(documented).collect::<Vec<_>>(),
            documented.difference(deployed).collect::<Vec<_>>()
        ));
    }
    if &served != documented {
        return Err(format!(
            "router vs openapi.yaml: {:?} only served, {:?} only documented",
            served.difference(documented).collect::<Vec<_>>(),
            documented.difference(&served).collect::<Vec<_>>()
        ));
    }
    Ok(())
}

#[tokio::test]
async fn the_router_the_template_and_openapi_have_one_set_of_routes() {
    let (deployed, documented, sources) = (deployed(), documented(), sources());
    let router = Harness::new().router;
    one_set(&router, &sources, &deployed, &documented)
        .await
        .unwrap();
    assert!(documented.len() >= 6, "{documented:?}");
    // Every path the source declares is a documented one (and so probed above).
    let paths: BTreeSet<String> = documented.iter().map(|(_, p)| p.clone()).collect();
    let declared = declared(&sources).unwrap();
    assert!(declared.len() >= 6, "{declared:?}");
    assert!(declared.is_subset(&paths), "{declared:?} vs {paths:?}");
}

/// The blind spot closed: a route on a path only the router knows (neither document names
/// it) is found, through the path its source declares.
#[tokio::test]
async fn a_route_only_the_router_serves_is_found() {
    let (deployed, documented) = (deployed(), documented());
    let router = Harness::new().router.route(
        "/v1/hidden/{id}",
        // Any method, answered in JSON as the router's own routes are.
        axum::routing::any(|| async { axum::Json(serde_json::json!({})) }),
    );
    let mut sources = sources();
    sources.push((
        "planted.rs".into(),
        r#"Router::new().route("/v1/hidden/{id}", get(hidden))"#.into(),
    ));
    let err = one_set(&router, &sources, &deployed, &documented)
        .await
        .unwrap_err();
    assert!(err.contains("/v1/hidden/{id}"), "{err}");
    // Without its source's path, the probe would not have seen it: the blind spot this closes.
    assert!(one_set(&router, &self::sources(), &deployed, &documented)
        .await
        .is_ok());
    // And a path hidden from the source scan is refused, not passed over.
    let hidden = [("planted.rs".to_owned(), ".route(HIDDEN, get(h))".to_owned())];
    assert!(declared(&hidden).unwrap_err().contains("not a literal"));
    let nested = [("planted.rs".to_owned(), ".nest(\"/v2\", other)".to_owned())];
    assert!(declared(&nested).unwrap_err().contains(".nest("));
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
