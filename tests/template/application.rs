//! The application surface (docs/design.md, "Application surface"): the HTTP API's routes and who
//! may call them (IAM by default, the JWT authorizer with its parameters), the subscriber index the
//! list route queries, and the ledger's stream into the events function, with its failure handling
//! and its bus.

use std::collections::{BTreeMap, BTreeSet};

use serde_norway::Value;

use super::iam::{condition, params, resolve};
use super::{resource, scalar, template};

/// The routes the API serves (the contract's, `functions/api/openapi.yaml`).
const ROUTES: [&str; 11] = [
    "PUT /v1/series/{id}",
    "GET /v1/series/{id}",
    "DELETE /v1/series/{id}",
    "GET /v1/subscribers/{id}/series",
    "PUT /v1/reminders/{id}",
    "GET /v1/reminders/{id}",
    "DELETE /v1/reminders/{id}",
    "GET /v1/subscribers/{id}/reminders",
    "GET /v1/subscribers/{id}/preferences",
    "PUT /v1/subscribers/{id}/preferences",
    "DELETE /v1/subscribers/{id}",
];

/// Every resource of this type as deployed with these parameters: `(name, properties)`.
fn deployed(t: &Value, p: &BTreeMap<String, String>, kind: &str) -> Vec<(String, Value)> {
    t["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(kind))
        .filter(|(_, r)| r["Condition"].as_str().is_none_or(|c| condition(t, p, c)))
        .map(|(name, r)| {
            let props = resolve(t, p, &r["Properties"]).unwrap();
            (name.as_str().unwrap().to_owned(), props)
        })
        .collect()
}

fn tag<'a>(v: &'a Value, tag: &str) -> Option<&'a str> {
    match v {
        Value::Tagged(t) if t.tag == tag => t.value.as_str(),
        _ => None,
    }
}

/// Each route's `(key, authorization type, authorizer)` as deployed.
fn routes(overrides: &[(&str, &str)]) -> Vec<(String, String, Option<String>)> {
    let t = template();
    let p = params(&t, overrides);
    let routes = deployed(&t, &p, "AWS::ApiGatewayV2::Route");
    routes
        .iter()
        .map(|(name, r)| {
            // A `!Ref` to a resource resolves to `${Name}`.
            assert_eq!(r["ApiId"].as_str(), Some("${HttpApi}"), "{name}");
            assert_eq!(
                r["Target"].as_str(),
                Some("integrations/${ApiIntegration}"),
                "{name} goes to the api function"
            );
            (
                r["RouteKey"].as_str().unwrap().to_owned(),
                r["AuthorizationType"].as_str().unwrap().to_owned(),
                r["AuthorizerId"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn the_api_serves_its_routes_with_iam_by_default_and_jwt_with_its_parameters() {
    let keys = |rs: &[(String, String, Option<String>)]| -> BTreeSet<String> {
        rs.iter().map(|r| r.0.clone()).collect()
    };
    let want: BTreeSet<String> = ROUTES.iter().map(|r| r.to_string()).collect();

    let by_default = routes(&[]);
    assert_eq!(keys(&by_default), want);
    for (key, auth, authorizer) in &by_default {
        assert_eq!(auth, "AWS_IAM", "{key}: SigV4 by default");
        assert_eq!(authorizer, &None, "{key}");
    }
    let t = template();
    assert!(!condition(&t, &params(&t, &[]), "JwtAuth"));

    let jwt = [
        ("JwtIssuer", "https://auth.example.com/"),
        ("JwtAudience", "reminders-api,reminders-cli"),
    ];
    let with_jwt = routes(&jwt);
    assert_eq!(keys(&with_jwt), want);
    for (key, auth, authorizer) in &with_jwt {
        assert_eq!(auth, "JWT", "{key}: the JWT authorizer replaces IAM");
        assert_eq!(authorizer.as_deref(), Some("${JwtAuthorizer}"), "{key}");
    }
    let p = params(&t, &jwt);
    let authorizers = deployed(&t, &p, "AWS::ApiGatewayV2::Authorizer");
    assert_eq!(authorizers.len(), 1);
    let (_, a) = &authorizers[0];
    assert_eq!(a["AuthorizerType"].as_str(), Some("JWT"));
    assert_eq!(
        a["JwtConfiguration"]["Issuer"].as_str(),
        Some("https://auth.example.com/")
    );
    let audience: Vec<&str> = a["JwtConfiguration"]["Audience"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(audience, ["reminders-api", "reminders-cli"]);
    // Each route's scope, after the prefix; none with JwtScopes=false, and none on IAM.
    let scopes = |overrides: &[(&str, &str)]| -> BTreeMap<String, Option<Vec<String>>> {
        let p = params(&t, overrides);
        deployed(&t, &p, "AWS::ApiGatewayV2::Route")
            .into_iter()
            .map(|(_, r)| {
                let s = r["AuthorizationScopes"].as_sequence().map(|s| {
                    s.iter()
                        .map(|v| v.as_str().unwrap().to_owned())
                        .collect::<Vec<_>>()
                });
                (r["RouteKey"].as_str().unwrap().to_owned(), s)
            })
            .collect()
    };
    let prefixed = [
        jwt[0],
        jwt[1],
        ("JwtScopePrefix", "https://reminders.example.com/"),
    ];
    let want_scope = |key: &str| {
        let name = match key {
            k if k.ends_with("/preferences") => "subscribers/preferences",
            "DELETE /v1/subscribers/{id}" => "subscribers/erase",
            k if k.starts_with("GET") => "reminders/read",
            _ => "reminders/write",
        };
        Some(vec![format!("https://reminders.example.com/{name}")])
    };
    for (key, got) in scopes(&prefixed) {
        assert_eq!(got, want_scope(&key), "{key}");
    }
    let unscoped = [jwt[0], jwt[1], ("JwtScopes", "false")];
    assert!(scopes(&unscoped).values().all(Option::is_none));
    assert!(
        scopes(&[]).values().all(Option::is_none),
        "IAM routes carry no scopes"
    );
    // No authorizer at all without the parameters (an empty issuer would fail the deploy).
    assert!(deployed(&t, &params(&t, &[]), "AWS::ApiGatewayV2::Authorizer").is_empty());
    // One without the other is refused by the template's Rules, not silently IAM.
    let rules = format!("{:?}", t["Rules"]);
    assert!(
        rules.contains("JwtIssuer") && rules.contains("JwtAudience"),
        "{rules}"
    );
}

#[test]
fn the_api_is_logged_throttled_and_invokes_only_its_function() {
    let t = template();
    let p = params(&t, &[]);
    let stages = deployed(&t, &p, "AWS::ApiGatewayV2::Stage");
    assert_eq!(stages.len(), 1);
    let (_, stage) = &stages[0];
    assert_eq!(stage["StageName"].as_str(), Some("$default"));
    assert_eq!(
        tag(&stage["AccessLogSettings"]["DestinationArn"], "GetAtt"),
        Some("ApiAccessLogGroup.Arn")
    );
    let format = stage["AccessLogSettings"]["Format"].as_str().unwrap();
    let line: serde_json::Value = serde_json::from_str(format).expect("access log lines are JSON");
    for field in ["requestId", "routeKey", "status"] {
        assert!(line.get(field).is_some(), "access log without {field}");
    }
    let route = &stage["DefaultRouteSettings"];
    for limit in ["ThrottlingRateLimit", "ThrottlingBurstLimit"] {
        let v: f64 = route[limit].as_str().unwrap().parse().unwrap();
        assert!(v > 0.0, "{limit}");
    }
    let logs = resource(&t, "ApiAccessLogGroup");
    assert!(logs["RetentionInDays"].as_u64().is_some());

    // The integration outlasts the function, so the caller sees the function's own answer.
    let integration = resource(&t, "ApiIntegration");
    assert_eq!(
        tag(&integration["IntegrationUri"], "GetAtt"),
        Some("ApiFunction.Arn")
    );
    assert_eq!(integration["PayloadFormatVersion"].as_str(), Some("2.0"));
    let timeout_ms = integration["TimeoutInMillis"].as_u64().unwrap();
    let function_secs: u64 = scalar(&t, &resource(&t, "ApiFunction")["Timeout"])
        .parse()
        .unwrap();
    assert!(timeout_ms > function_secs * 1000);

    let permission = resource(&t, "ApiInvokePermission");
    assert_eq!(
        tag(&permission["FunctionName"], "GetAtt"),
        Some("ApiFunction.Arn")
    );
    assert_eq!(
        permission["Principal"].as_str(),
        Some("apigateway.amazonaws.com")
    );
    let source = resolve(&t, &p, &permission["SourceArn"]).unwrap();
    assert_eq!(
        source.as_str(),
        Some("arn:aws:execute-api:us-east-1:123456789012:${HttpApi}/*"),
        "this API only"
    );
    // The function has no event of its own (SAM would add a second API).
    assert!(resource(&t, "ApiFunction")["Events"].is_null());
}

/// The subscriber index: every reminder (not sparse), newest due first by `due_at`, with what
/// a list entry shows.
#[test]
fn the_reminders_table_has_the_subscriber_index() {
    let t = template();
    let table = resource(&t, "RemindersTable");
    let indexes = table["GlobalSecondaryIndexes"].as_sequence().unwrap();
    let gsi = indexes
        .iter()
        .find(|i| i["IndexName"].as_str() == Some("subscriber-index"))
        .expect("a subscriber-index");
    let key: Vec<(&str, &str)> = gsi["KeySchema"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["AttributeName"].as_str().unwrap(),
                k["KeyType"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(key, [("subscriber_id", "HASH"), ("due_at", "RANGE")]);
    let types: BTreeMap<&str, &str> = table["AttributeDefinitions"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["AttributeName"].as_str().unwrap(),
                a["AttributeType"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(types["subscriber_id"], "S");
    assert_eq!(types["due_at"], "N");
    assert_eq!(
        gsi["Projection"]["ProjectionType"].as_str(),
        Some("INCLUDE")
    );
    let projected: BTreeSet<&str> = gsi["Projection"]["NonKeyAttributes"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        projected,
        BTreeSet::from(reminders::aws::bootstrap::SUBSCRIBER_INDEX_PROJECTION),
        "as the bootstrap creates it"
    );
    // A deployed index's projection cannot change in a stack update (CloudFormation refuses
    // it): lists read owners from the table instead, and the projection stays as deployed.
    assert!(!projected.contains("owner"));
}

/// The ledger's stream carries both images (the events function needs the status before and
/// after a write) into the events function, which answers per record, retries by halves, and
/// sends what still fails to its own DLQ.
#[test]
fn the_ledger_streams_into_the_events_function() {
    let t = template();
    assert_eq!(
        resource(&t, "DeliveriesTable")["StreamSpecification"]["StreamViewType"].as_str(),
        Some("NEW_AND_OLD_IMAGES")
    );
    let events = &resource(&t, "EventsFunction")["Events"];
    let sources: Vec<&Value> = events.as_mapping().unwrap().values().collect();
    assert_eq!(sources.len(), 1, "one event source: the stream");
    let esm = &sources[0]["Properties"];
    assert_eq!(sources[0]["Type"].as_str(), Some("DynamoDB"));
    assert_eq!(
        tag(&esm["Stream"], "GetAtt"),
        Some("DeliveriesTable.StreamArn")
    );
    assert_eq!(
        esm["StartingPosition"].as_str(),
        Some("TRIM_HORIZON"),
        "from the oldest change: none is skipped when the mapping is created"
    );
    assert_eq!(
        esm["FunctionResponseTypes"],
        Value::Sequence(vec![Value::String("ReportBatchItemFailures".into())])
    );
    assert_eq!(esm["BisectBatchOnFunctionError"].as_bool(), Some(true));
    // Items no version can read are logged and skipped by the handler, so only a failed
    // publish is retried, and it is retried while the stream keeps the record: a bus outage
    // loses no event.
    let retries = esm["MaximumRetryAttempts"].as_i64().unwrap();
    assert_eq!(
        retries, -1,
        "retried without a count, bounded by the record's age"
    );
    let age = esm["MaximumRecordAgeInSeconds"].as_i64().unwrap();
    assert!(
        age == -1 || (60..=86_400).contains(&age),
        "a change is retried while the stream keeps it (24 h): {age}"
    );
    let batch = esm["BatchSize"].as_u64().unwrap();
    assert!((1..=1000).contains(&batch));
    assert!(esm["MaximumBatchingWindowInSeconds"].as_u64().unwrap() <= 5);
    assert_eq!(
        tag(
            &esm["DestinationConfig"]["OnFailure"]["Destination"],
            "GetAtt"
        ),
        Some("EventsDeadLetterQueue.Arn")
    );
    let dlq = &t["Resources"]["EventsDeadLetterQueue"];
    assert_eq!(dlq["DeletionPolicy"].as_str(), Some("Retain"), "evidence");
    assert_eq!(
        dlq["Properties"]["SqsManagedSseEnabled"].as_bool(),
        Some(true)
    );
}

/// `EventBusName` empty: the stack's own bus; set: that bus. The function's variable, the
/// output and the role's one PutEvents resource follow it.
#[test]
fn the_events_go_to_the_stacks_bus_or_the_one_named() {
    let t = template();
    for (overrides, bus_name, bus_arn) in [
        (vec![], "${EventBus}", "EventBus.Arn"),
        (
            vec![("EventBusName", "orders")],
            "orders",
            "arn:aws:events:us-east-1:123456789012:event-bus/orders",
        ),
    ] {
        let p = params(&t, &overrides);
        let created = deployed(&t, &p, "AWS::Events::EventBus");
        assert_eq!(
            created.len(),
            usize::from(overrides.is_empty()),
            "{overrides:?}"
        );
        if let Some((_, bus)) = created.first() {
            assert_eq!(bus["Name"].as_str(), Some("reminders-reminders"));
        }
        let env = resolve(
            &t,
            &p,
            &resource(&t, "EventsFunction")["Environment"]["Variables"]["EVENT_BUS_NAME"],
        )
        .unwrap();
        assert_eq!(env.as_str(), Some(bus_name), "{overrides:?}");
        let output = resolve(&t, &p, &t["Outputs"]["EventBusName"]["Value"]).unwrap();
        assert_eq!(output, env, "the output is the function's bus");
        let statements = super::iam::deployed_statements(&t, &p, "EventsRole");
        let put: Vec<&Value> = statements
            .iter()
            .filter(|s| format!("{:?}", s["Action"]).contains("events:PutEvents"))
            .collect();
        assert_eq!(put.len(), 1);
        let resource = &put[0]["Resource"];
        let granted = resource
            .as_str()
            .map(str::to_owned)
            .or_else(|| tag(resource, "GetAtt").map(str::to_owned));
        assert_eq!(granted.as_deref(), Some(bus_arn), "{overrides:?}");
    }
}
