//! The api bootstrap driven through a Lambda Runtime API stub with API Gateway HTTP API
//! (payload 2.0) events against the emulator: `lambda_http` hands the router the request and
//! API Gateway gets the router's answer.

use reminders_test_support::runtime_api;
use reminders_test_support::suppression_key;

use runtime_api::{assert_calls_declared, invoke, Stack, CARGO_LAMBDA_WATCH_DEADLINE};
use serde_json::{json, Value};

/// An API Gateway HTTP API event, as the `$default` stage sends it to the integration.
fn event(method: &str, path: &str, route: &str, id: &str, body: Option<Value>) -> Value {
    json!({
        "version": "2.0",
        "routeKey": format!("{method} {route}"),
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", "host": "abc123.execute-api.us-east-1.amazonaws.com"},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "abc123",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "curl/8"},
            "requestId": "req-1",
            "routeKey": format!("{method} {route}"),
            "stage": "$default",
            "time": "02/Dec/2026:07:00:00 +0000",
            "timeEpoch": 1_796_194_800_000u64
        },
        "pathParameters": {"id": id},
        "body": body.map(|b| b.to_string()),
        "isBase64Encoded": false
    })
}

/// The api bootstrap's answer to `event`, on `stack`.
async fn call(stack: &Stack, event: Value) -> runtime_api::Answer {
    invoke(
        env!("CARGO_BIN_EXE_api"),
        &stack.env(),
        event,
        CARGO_LAMBDA_WATCH_DEADLINE,
    )
    .await
}

fn answer_body(answer: &runtime_api::Answer) -> Value {
    let body = answer.body["body"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", answer.body));
    serde_json::from_str(body).unwrap()
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_put_through_api_gateway_creates_the_reminder() {
    let stack = Stack::create("rt-api").await;
    let body = json!({
        "subscriber_id": "u-42",
        "due_at": "2030-01-01T10:00:00Z",
        "fresh_for_secs": 3600,
        "channels": {"email": "user@example.org"},
        "content": {"subject": "Pickup", "body": "at five"}
    });
    let route = "/v1/reminders/{id}";
    let put = as_jwt(
        event("PUT", "/v1/reminders/rt-1", route, "rt-1", Some(body)),
        "app-rt",
        &ALL_SCOPES,
    );
    let answer = call(&stack, put).await;
    assert_eq!(answer.kind, "response", "{}", answer.body);
    assert_eq!(answer.body["statusCode"], 201, "{}", answer.body);
    let state = answer_body(&answer);
    assert_eq!(
        state["channels"]["email"]["recipient"], "u***@example.org",
        "{state}"
    );
    assert_calls_declared("api", &answer);
    assert!(
        answer.aws_calls.contains("DynamoDB.PutItem"),
        "{:?}",
        answer.aws_calls
    );

    let get = as_jwt(
        event("GET", "/v1/reminders/rt-1", route, "rt-1", None),
        "app-rt",
        &ALL_SCOPES,
    );
    let answer = call(&stack, get).await;
    assert_eq!(answer.body["statusCode"], 200, "{}", answer.body);
    assert_eq!(answer_body(&answer)["status"], "scheduled");
    assert_calls_declared("api", &answer);

    let list = as_jwt(
        event(
            "GET",
            "/v1/subscribers/u-42/reminders",
            "/v1/subscribers/{id}/reminders",
            "u-42",
            None,
        ),
        "app-rt",
        &ALL_SCOPES,
    );
    let answer = call(&stack, list).await;
    assert_eq!(answer.body["statusCode"], 200, "{}", answer.body);
    assert_eq!(answer_body(&answer)["reminders"][0]["reminder_id"], "rt-1");
    assert!(
        answer.aws_calls.contains("DynamoDB.Query"),
        "{:?}",
        answer.aws_calls
    );
    assert_calls_declared("api", &answer);
}

/// A bad body through API Gateway: the router's 400 naming the field, not a Lambda error.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_bad_body_through_api_gateway_is_a_400_naming_the_field() {
    let stack = Stack::create("rt-api-bad").await;
    let body = json!({
        "subscriber_id": "u-42",
        "due_at": "soon",
        "channels": {"email": "user@example.org"},
        "content": {"subject": "Pickup", "body": "at five"}
    });
    let put = as_jwt(
        event(
            "PUT",
            "/v1/reminders/rt-2",
            "/v1/reminders/{id}",
            "rt-2",
            Some(body),
        ),
        "app-rt",
        &ALL_SCOPES,
    );
    let answer = call(&stack, put).await;
    assert_eq!(answer.kind, "response", "{}", answer.body);
    assert_eq!(answer.body["statusCode"], 400, "{}", answer.body);
    assert_eq!(answer_body(&answer)["error"]["field"], "due_at");
    assert!(
        answer.aws_calls.is_empty(),
        "refused before any call: {:?}",
        answer.aws_calls
    );
}

const ALL_SCOPES: [&str; 3] = [
    "reminders/read",
    "reminders/write",
    "subscribers/preferences",
];

/// The event as API Gateway's IAM authorizer passes it on: the caller's ARN (a role's session).
fn as_iam(mut event: Value, user_arn: &str) -> Value {
    event["requestContext"]["authorizer"] = json!({
        "iam": {"accessKey": "ASIAEXAMPLE", "accountId": "123456789012",
                "callerId": "AROAEXAMPLE:session", "principalOrgId": null,
                "userArn": user_arn, "userId": "AROAEXAMPLE:session"}
    });
    event
}

/// A request that reaches the function with no authorizer's identity (a route deployed
/// without one, a direct invoke) is refused: it is never taken for an operator's.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_request_without_an_authorizer_identity_is_refused_401() {
    let stack = Stack::create("rt-api-anon").await;
    let get = event(
        "GET",
        "/v1/reminders/rt-9",
        "/v1/reminders/{id}",
        "rt-9",
        None,
    );
    let answer = call(&stack, get).await;
    assert_eq!(answer.kind, "response", "{}", answer.body);
    assert_eq!(answer.body["statusCode"], 401, "{}", answer.body);
    assert_eq!(answer_body(&answer)["error"]["code"], "unauthorized");
    assert!(
        answer.aws_calls.is_empty(),
        "refused before any call: {:?}",
        answer.aws_calls
    );
}

/// IAM callers: every session of one role is one owner; another role's GET and PUT find
/// nothing, and its PUT changes nothing.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn iam_callers_own_by_role_and_another_role_cannot_take_a_reminder() {
    let stack = Stack::create("rt-api-iam").await;
    let role = "arn:aws:sts::123456789012:assumed-role/app";
    let other = "arn:aws:sts::123456789012:assumed-role/intruder/s-1";
    let route = "/v1/reminders/{id}";
    let body = |to: &str| {
        json!({
            "subscriber_id": "u-8",
            "due_at": "2030-01-01T10:00:00Z",
            "channels": {"email": to},
            "content": {"subject": "Pickup", "body": "at five"}
        })
    };
    let path = "/v1/reminders/i-1";
    let calls = [
        (
            format!("{role}/i-0aaa"),
            "PUT",
            Some(body("user@example.org")),
            201,
        ),
        (format!("{role}/i-0bbb"), "GET", None, 200),
        (other.to_owned(), "GET", None, 404),
        (
            other.to_owned(),
            "PUT",
            Some(body("thief@example.net")),
            404,
        ),
        (other.to_owned(), "DELETE", None, 404),
    ];
    for (who, method, body, want) in calls {
        let e = as_iam(event(method, path, route, "i-1", body), &who);
        let answer = call(&stack, e).await;
        assert_eq!(
            answer.body["statusCode"], want,
            "{who} {method}: {}",
            answer.body
        );
        assert_calls_declared("api", &answer);
    }
    let e = as_iam(
        event("GET", path, route, "i-1", None),
        &format!("{role}/later"),
    );
    let answer = call(&stack, e).await;
    let state = answer_body(&answer);
    assert_eq!(state["status"], "scheduled", "{state}");
    assert_eq!(
        state["channels"]["email"]["recipient"], "u***@example.org",
        "the intruder's PUT changed nothing: {state}"
    );
}

/// The event as API Gateway's JWT authorizer passes it on: the token's claims and scopes.
fn as_jwt(mut event: Value, client_id: &str, scopes: &[&str]) -> Value {
    event["requestContext"]["authorizer"] = json!({
        "jwt": {"claims": {"client_id": client_id, "sub": client_id, "scope": scopes.join(" ")},
                "scopes": scopes}
    });
    event
}

/// Every route through API Gateway with the JWT authorizer's context: the owner comes from
/// the token, each route checks its scope, and another application's token finds nothing
/// (reminders and series; an occurrence skipped and one edited on its own, before either is
/// made).
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn every_route_through_api_gateway_as_a_jwt_caller() {
    let stack = Stack::create("rt-api-jwt").await;
    let all = ALL_SCOPES;
    let rem = "/v1/reminders/{id}";
    let prefs = "/v1/subscribers/{id}/preferences";
    let list = "/v1/subscribers/{id}/reminders";
    let body = json!({
        "subscriber_id": "u-7",
        "due_at": "2030-01-01T10:00:00Z",
        "channels": {"email": "user@example.org"},
        "content": {"subject": "Pickup", "body": "at five"}
    });
    let quiet = json!({"opted_out": ["sms"]});
    // A series from 2030: none of its occurrences is made now.
    let ser = "/v1/series/{id}";
    let ser_list = "/v1/subscribers/{id}/series";
    let series = json!({
        "subscriber_id": "u-7",
        "rule": "FREQ=DAILY;BYHOUR=9;BYMINUTE=15",
        "zone": "Europe/Paris",
        "starts_at": "2030-01-01T00:00:00Z",
        "channels": {"email": "user@example.org"},
        "content": {"subject": "Standup", "body": "at 9:15"}
    });
    let occurrence = json!({
        "subscriber_id": "u-7",
        "due_at": "2030-01-02T08:15:00Z",
        "channels": {"email": "user@example.org"},
        "content": {"subject": "Standup, moved", "body": "this one only"}
    });
    let calls = [
        (
            "app-a",
            &all[..],
            "PUT",
            "/v1/reminders/j-1",
            rem,
            "j-1",
            Some(body),
            201,
        ),
        (
            "app-a",
            &all[..],
            "GET",
            "/v1/reminders/j-1",
            rem,
            "j-1",
            None,
            200,
        ),
        (
            "app-a",
            &all[..],
            "GET",
            "/v1/subscribers/u-7/reminders",
            list,
            "u-7",
            None,
            200,
        ),
        (
            "app-a",
            &all[..],
            "PUT",
            "/v1/subscribers/u-7/preferences",
            prefs,
            "u-7",
            Some(quiet),
            200,
        ),
        (
            "app-a",
            &all[..],
            "GET",
            "/v1/subscribers/u-7/preferences",
            prefs,
            "u-7",
            None,
            200,
        ),
        (
            "app-b",
            &all[..],
            "GET",
            "/v1/reminders/j-1",
            rem,
            "j-1",
            None,
            404,
        ),
        (
            "app-b",
            &all[..],
            "DELETE",
            "/v1/reminders/j-1",
            rem,
            "j-1",
            None,
            404,
        ),
        (
            "app-a",
            &all[..1],
            "DELETE",
            "/v1/reminders/j-1",
            rem,
            "j-1",
            None,
            403,
        ),
        (
            "app-a",
            &all[..],
            "DELETE",
            "/v1/reminders/j-1",
            rem,
            "j-1",
            None,
            200,
        ),
        (
            "app-a",
            &all[..],
            "PUT",
            "/v1/series/js-1",
            ser,
            "js-1",
            Some(series.clone()),
            201,
        ),
        (
            "app-a",
            &all[..],
            "PUT",
            "/v1/series/js-1",
            ser,
            "js-1",
            Some(series),
            200,
        ),
        (
            "app-a",
            &all[..],
            "GET",
            "/v1/series/js-1",
            ser,
            "js-1",
            None,
            200,
        ),
        (
            "app-a",
            &all[..],
            "GET",
            "/v1/subscribers/u-7/series",
            ser_list,
            "u-7",
            None,
            200,
        ),
        // One occurrence skipped, another edited on its own, before either is made.
        (
            "app-a",
            &all[..],
            "DELETE",
            "/v1/reminders/js-1::20300101T081500Z",
            rem,
            "js-1::20300101T081500Z",
            None,
            200,
        ),
        (
            "app-a",
            &all[..],
            "PUT",
            "/v1/reminders/js-1::20300102T081500Z",
            rem,
            "js-1::20300102T081500Z",
            Some(occurrence),
            201,
        ),
        (
            "app-b",
            &all[..],
            "GET",
            "/v1/series/js-1",
            ser,
            "js-1",
            None,
            404,
        ),
        (
            "app-b",
            &all[..],
            "DELETE",
            "/v1/series/js-1",
            ser,
            "js-1",
            None,
            404,
        ),
        (
            "app-a",
            &all[..1],
            "DELETE",
            "/v1/series/js-1",
            ser,
            "js-1",
            None,
            403,
        ),
        (
            "app-a",
            &all[..],
            "DELETE",
            "/v1/series/js-1",
            ser,
            "js-1",
            None,
            200,
        ),
    ];
    for (who, scopes, method, path, route, id, body, want) in calls {
        let e = as_jwt(event(method, path, route, id, body), who, scopes);
        let answer = call(&stack, e).await;
        assert_eq!(answer.kind, "response", "{}", answer.body);
        assert_eq!(
            answer.body["statusCode"], want,
            "{who} {method} {path}: {}",
            answer.body
        );
        assert_calls_declared("api", &answer);
    }
    // The list by another application leaves app-a's reminder out.
    let e = as_jwt(
        event("GET", "/v1/subscribers/u-7/reminders", list, "u-7", None),
        "app-b",
        &all,
    );
    let answer = call(&stack, e).await;
    assert_eq!(
        answer_body(&answer)["reminders"],
        json!([]),
        "{}",
        answer.body
    );
    // And app-a's series; app-a's own list holds it, cancelled, with its skipped occurrence.
    let e = as_jwt(
        event("GET", "/v1/subscribers/u-7/series", ser_list, "u-7", None),
        "app-b",
        &all,
    );
    let answer = call(&stack, e).await;
    assert_eq!(answer_body(&answer)["series"], json!([]), "{}", answer.body);
    let e = as_jwt(
        event("GET", "/v1/subscribers/u-7/series", ser_list, "u-7", None),
        "app-a",
        &all,
    );
    let answer = call(&stack, e).await;
    let page = answer_body(&answer);
    assert_eq!(page["series"][0]["series_id"], "js-1", "{page}");
    assert_eq!(page["series"][0]["status"], "cancelled", "{page}");
    let skipped = "/v1/reminders/js-1::20300101T081500Z";
    let e = as_jwt(
        event("GET", skipped, rem, "js-1::20300101T081500Z", None),
        "app-a",
        &all,
    );
    let answer = call(&stack, e).await;
    assert_eq!(answer.body["statusCode"], 200, "{}", answer.body);
    assert_eq!(
        answer_body(&answer)["status"],
        "cancelled",
        "{}",
        answer.body
    );
}

/// Erasure through API Gateway on the emulator: a subscriber with two reminders, preferences and
/// a suppression of their address; after `DELETE /v1/subscribers/{id}` nothing of them is left
/// but the ledger's masked history, and a second call finds nothing.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn an_erasure_leaves_only_the_ledgers_masked_history() {
    use reminders::domain::{
        Channel, DeliveryKey, Recipient, ReminderId, SubscriberId, Suppression, SuppressionSource,
    };
    use reminders::ports::{Ledger, ReminderStore};
    let stack = Stack::create("rt-api-erase").await;
    let (arn, key) = suppression_key::suppression_key_secret(&stack.sdk, "rt-api-erase").await;
    let mut env = stack.env();
    env.push(("SUPPRESSION_KEY_SECRET_ARN".to_owned(), arn.clone()));
    // The stack's bus, with a rule taking erasures to a queue the test reads.
    let unique = format!("rt-api-erase-{}", std::process::id());
    let events = aws_sdk_eventbridge::Client::new(&stack.sdk);
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    events
        .create_event_bus()
        .name(&unique)
        .send()
        .await
        .unwrap();
    let seen = sqs
        .create_queue()
        .queue_name(format!("{unique}-seen"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let seen_arn = reminders::consumer::event::arn_for_url(&seen, "us-east-1");
    events
        .put_rule()
        .name(format!("{unique}-erased"))
        .event_bus_name(&unique)
        .event_pattern(r#"{"source": ["reminders"], "detail-type": ["Subscriber Erased"]}"#)
        .send()
        .await
        .unwrap();
    events
        .put_targets()
        .rule(format!("{unique}-erased"))
        .event_bus_name(&unique)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("seen")
                .arn(seen_arn)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    env.push(("EVENT_BUS_NAME".to_owned(), unique.clone()));
    let scopes = [
        "reminders/read",
        "reminders/write",
        "subscribers/preferences",
        "subscribers/erase",
    ];
    let run = |e: Value| {
        let env = env.clone();
        async move {
            invoke(
                env!("CARGO_BIN_EXE_api"),
                &env,
                as_jwt(e, "app-e", &scopes),
                CARGO_LAMBDA_WATCH_DEADLINE,
            )
            .await
        }
    };
    let rem = "/v1/reminders/{id}";
    for id in ["x-1", "x-2"] {
        let body = json!({
            "subscriber_id": "u-9",
            "due_at": "2030-01-01T10:00:00Z",
            "channels": {"email": "person@example.org", "sms": "+14155550199"},
            "content": {"subject": "Pickup", "body": "at five"}
        });
        let path = format!("/v1/reminders/{id}");
        let answer = run(event("PUT", &path, rem, id, Some(body))).await;
        assert_eq!(answer.body["statusCode"], 201, "{}", answer.body);
    }
    let prefs = "/v1/subscribers/{id}/preferences";
    let quiet = json!({"opted_out": ["sms"]});
    let answer = run(event(
        "PUT",
        "/v1/subscribers/u-9/preferences",
        prefs,
        "u-9",
        Some(quiet),
    ))
    .await;
    assert_eq!(answer.body["statusCode"], 200, "{}", answer.body);
    let dynamo = aws_sdk_dynamodb::Client::new(&stack.sdk);
    let store =
        reminders::aws::dynamo::DynamoReminderStore::new(dynamo.clone(), &stack.reminders_table, 8);
    let address = Recipient::parse(Channel::Email, "person@example.org").unwrap();
    let sup = Suppression::record(
        &key,
        &address,
        SuppressionSource::SesBounce,
        reminders::clock::Timestamp::from_millis(1_796_385_600_000),
    );
    store.put_suppression(&sup).await.unwrap();

    let erase = "/v1/subscribers/{id}";
    let answer = run(event("DELETE", "/v1/subscribers/u-9", erase, "u-9", None)).await;
    assert_eq!(answer.body["statusCode"], 200, "{}", answer.body);
    assert_calls_declared("api", &answer);
    let erased = answer_body(&answer);
    assert_eq!(erased["reminders_cancelled"], 2, "{erased}");
    assert_eq!(erased["reminders_deleted"], 2, "{erased}");
    assert_eq!(erased["preferences_deleted"], true, "{erased}");
    assert_eq!(erased["suppressions_lifted"], 1, "{erased}");
    assert_eq!(erased["event_published"], true, "{erased}");
    // The event says it happened, with the counts and no address or content.
    let got = sqs
        .receive_message()
        .queue_url(&seen)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(got.len(), 1, "{got:?}");
    let published: Value = serde_json::from_str(got[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(published["detail-type"], "Subscriber Erased", "{published}");
    assert_eq!(published["detail"]["subscriber_id"], "u-9", "{published}");
    assert_eq!(published["detail"]["reminders_deleted"], 2, "{published}");
    let text = published.to_string();
    for personal in ["person@example.org", "4155550199", "Pickup"] {
        assert!(
            !text.contains(personal),
            "the event holds {personal}: {text}"
        );
    }

    // Nothing of them is left in the reminders table: no item holds the subscriber or the
    // address, and the API finds nothing.
    let items = dynamo
        .scan()
        .table_name(&stack.reminders_table)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    assert!(items.is_empty(), "left in the reminders table: {items:?}");
    for (path, route, id) in [
        ("/v1/reminders/x-1", rem, "x-1"),
        ("/v1/subscribers/u-9/preferences", prefs, "u-9"),
    ] {
        let answer = run(event("GET", path, route, id, None)).await;
        assert_eq!(answer.body["statusCode"], 404, "{path}: {}", answer.body);
    }
    // The ledger keeps each delivery, cancelled, and no address or content.
    let ledger = reminders::aws::dynamo::DynamoLedger::new(dynamo.clone(), &stack.deliveries_table);
    let sub = SubscriberId::parse("u-9").unwrap();
    for id in ["x-1", "x-2"] {
        for channel in [Channel::Email, Channel::Sms] {
            let k = DeliveryKey::derive(&ReminderId::parse(id).unwrap(), &sub, channel);
            let rec = ledger
                .get(&k)
                .await
                .unwrap()
                .expect("the ledger's history stays");
            assert_eq!(rec.status().as_str(), "cancelled");
        }
    }
    let ledger_items = dynamo
        .scan()
        .table_name(&stack.deliveries_table)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    assert_eq!(ledger_items.len(), 4);
    let text = format!("{ledger_items:?}");
    for personal in ["person@example.org", "4155550199", "Pickup", "at five"] {
        assert!(!text.contains(personal), "the ledger holds {personal}");
    }
    // Again: nothing to erase.
    let answer = run(event("DELETE", "/v1/subscribers/u-9", erase, "u-9", None)).await;
    assert_eq!(answer.body["statusCode"], 200, "{}", answer.body);
    let again = answer_body(&answer);
    assert_eq!(
        (
            again["reminders_deleted"].clone(),
            again["preferences_deleted"].clone()
        ),
        (json!(0), json!(false)),
        "{again}"
    );
}
