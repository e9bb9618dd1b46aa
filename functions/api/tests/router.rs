//! The API's router on in-memory ports (the same router `main.rs` and `remindctl local api`
//! serve): each call's answers, field-named refusals that never echo a recipient, concurrent
//! PUTs of one id, and every status code `openapi.yaml` documents.

mod common;

use axum::http::StatusCode;
use common::{body, call, call_raw, Harness, RECIPIENTS};
use reminders::ports::ledger::OP_GET as LEDGER_GET;
use reminders::ports::FaultPoint;
use serde_json::{json, Value};

#[tokio::test]
async fn a_put_creates_a_repeat_answers_the_same_state_and_a_change_edits() {
    let h = Harness::new();
    let (status, first) = h.put("r-1", body("u-1", "Pickup")).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["status"], "scheduled");
    assert_eq!(first["payload_version"], 1);
    assert_eq!(first["channels"]["email"]["recipient"], "u***@example.org");
    assert_eq!(first["channels"]["sms"]["status"], "scheduled");
    let (status, again) = h.put("r-1", body("u-1", "Pickup")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, first, "the same body answers the same state");
    let (status, edited) = h.put("r-1", body("u-1", "Pickup at six")).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["payload_version"], 2);
    assert_eq!(edited["content"]["subject"], "Pickup at six");
    let (status, got) = call(&h.router, "GET", "/v1/reminders/r-1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, edited);
}

#[tokio::test]
async fn once_cancelled_a_different_body_is_a_conflict_naming_why_and_the_same_body_is_not() {
    let h = Harness::new();
    h.put("r-2", body("u-1", "Pickup")).await;
    let (status, cancel) = call(&h.router, "DELETE", "/v1/reminders/r-2", None).await;
    assert_eq!(status, StatusCode::OK, "{cancel}");
    assert_eq!(cancel["status"], "cancelled");
    assert_eq!(cancel["channels"]["email"], "cancelled");
    assert_eq!(cancel["channels"]["sms"], "cancelled");
    let (status, again) = call(&h.router, "DELETE", "/v1/reminders/r-2", None).await;
    assert_eq!(
        (status, &again),
        (StatusCode::OK, &cancel),
        "a second DELETE answers the same"
    );
    let (status, conflict) = h.put("r-2", body("u-1", "Pickup at six")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{conflict}");
    assert_eq!(conflict["error"]["field"], "status");
    assert!(conflict["error"]["message"]
        .as_str()
        .unwrap()
        .contains("cancelled"));
    let (status, same) = h.put("r-2", body("u-1", "Pickup")).await;
    assert_eq!(status, StatusCode::OK, "{same}");
    assert_eq!(same["status"], "cancelled");
    let (status, moved) = h.put("r-2", body("u-2", "Pickup")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(moved["error"]["field"], "subscriber_id");
}

/// Ten bad bodies, each refused naming its field, none quoting a recipient back.
#[tokio::test]
async fn bad_bodies_get_400_naming_the_field_and_never_a_recipient() {
    let h = Harness::new();
    let good = body("u-1", "Pickup");
    let with = |path: &[&str], v: Value| {
        let mut b = good.clone();
        let mut at = &mut b;
        for p in &path[..path.len() - 1] {
            at = &mut at[*p];
        }
        at[path[path.len() - 1]] = v;
        b
    };
    let without = |field: &str| {
        let mut b = good.clone();
        b.as_object_mut().unwrap().remove(field);
        b
    };
    let cases: Vec<(Value, &str)> = vec![
        (
            with(&["channels", "sms"], json!("0044 20 7946 0958")),
            "channels.sms",
        ),
        (
            with(&["channels", "email"], json!("user@@example")),
            "channels.email",
        ),
        (
            with(&["channels", "sms"], json!(14155550100u64)),
            "channels.sms",
        ),
        (with(&["channels"], json!({})), "channels"),
        (with(&["due_at"], json!("next tuesday")), "due_at"),
        (with(&["due_at"], json!(1_798_131_600)), "due_at"),
        (with(&["fresh_for_secs"], json!(0)), "fresh_for_secs"),
        (without("subscriber_id"), "subscriber_id"),
        (
            with(&["content"], json!({"template_id": "t", "data": [1]})),
            "content.data",
        ),
        (with(&["subscriber_id"], json!("u 1")), "subscriber_id"),
        (
            {
                let mut b = without("fresh_for_secs");
                b["fresh_until"] = json!("2020-01-01T00:00:00Z");
                b
            },
            "fresh_until",
        ),
        (with(&["content", "subject"], json!(42)), "content.subject"),
        (
            with(&["channels"], json!({"secret.person@example.org": "email"})),
            "channels",
        ),
        (
            with(&["fresh_for_secs"], json!(400 * 86_400)),
            "fresh_for_secs",
        ),
        (with(&["due_at"], json!("2099-01-01T00:00:00Z")), "due_at"),
        // A valid number outside the allowed calling codes (+1 by default).
        (
            with(&["channels", "sms"], json!("+447700900123")),
            "channels.sms",
        ),
    ];
    for (i, (bad, field)) in cases.into_iter().enumerate() {
        let sent = bad.to_string();
        let (status, answer) = h.put(&format!("bad-{i}"), bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "case {i}: {answer}");
        assert_eq!(answer["error"]["field"], field, "case {i}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid");
        let text = answer.to_string();
        for r in RECIPIENTS.iter().chain(
            [
                "0044 20 7946 0958",
                "user@@example",
                "14155550100",
                "secret.person",
                "7700900123",
            ]
            .iter(),
        ) {
            assert!(
                !(sent.contains(r) && text.contains(r)),
                "case {i} echoes {r}: {text}"
            );
        }
        let (status, _) = call(&h.router, "GET", &format!("/v1/reminders/bad-{i}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "case {i}: nothing is stored");
    }
}

#[tokio::test]
async fn oversized_bodies_and_content_get_413() {
    let h = Harness::new();
    let huge = "x".repeat(reminders_api::MAX_REQUEST_BYTES + 1);
    let (status, answer) = h.put("big-1", json!({"padding": huge})).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    assert_eq!(answer["error"]["code"], "too_large");
    let mut b = body("u-1", "Pickup");
    b["content"]["body"] = json!("y".repeat(70 * 1024));
    let (status, answer) = h.put("big-2", b).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    assert_eq!(answer["error"]["field"], "content.body");
}

#[tokio::test]
async fn a_subscribers_reminders_come_newest_due_first_a_page_at_a_time() {
    let h = Harness::new();
    for (id, due) in [
        ("a", "2030-01-01T10:00:00Z"),
        ("b", "2030-01-03T10:00:00Z"),
        ("c", "2030-01-02T10:00:00Z"),
    ] {
        let mut b = body("u-9", "Pickup");
        b["due_at"] = json!(due);
        assert_eq!(h.put(id, b).await.0, StatusCode::CREATED);
    }
    h.put("other", body("u-8", "Pickup")).await;
    let (status, first) = call(
        &h.router,
        "GET",
        "/v1/subscribers/u-9/reminders?limit=2",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let ids = |page: &Value| -> Vec<String> {
        page["reminders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["reminder_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&first), ["b", "c"]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let uri = format!("/v1/subscribers/u-9/reminders?limit=2&cursor={cursor}");
    let (_, second) = call(&h.router, "GET", &uri, None).await;
    assert_eq!(ids(&second), ["a"]);
    assert_eq!(second["next_cursor"], Value::Null);
    assert_eq!(second["reminders"][0]["channels"], json!(["email", "sms"]));
    assert!(
        !second.to_string().contains("example.org"),
        "no recipient in a summary"
    );
}

/// Two PUTs of different bodies for one id at the same time: one creates, the other answers
/// `200` with its own whole body stored (an edit) or `409`; the stored reminder is always one
/// body, never a mix. On the in-memory store, whose conditional writes are atomic as
/// DynamoDB's are (moto's are not across concurrent requests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_of_different_bodies_never_mix() {
    for round in 0..200 {
        let h = Harness::new();
        let id = format!("race-{round}");
        let (a, b) = (body("u-1", "Body A"), body("u-1", "Body B"));
        let (ra, rb) = tokio::join!(
            tokio::spawn({
                let h = h.clone();
                let id = id.clone();
                async move { h.put(&id, a).await }
            }),
            tokio::spawn({
                let h = h.clone();
                let id = id.clone();
                async move { h.put(&id, b).await }
            }),
        );
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let statuses = [ra.0, rb.0];
        assert_eq!(
            statuses
                .iter()
                .filter(|s| **s == StatusCode::CREATED)
                .count(),
            1,
            "{statuses:?}"
        );
        for (status, answer, subject) in [(ra.0, &ra.1, "Body A"), (rb.0, &rb.1, "Body B")] {
            assert!(
                matches!(
                    status,
                    StatusCode::CREATED | StatusCode::OK | StatusCode::CONFLICT
                ),
                "{answer}"
            );
            if status != StatusCode::CONFLICT {
                assert_eq!(
                    answer["content"]["subject"], subject,
                    "an answer is its own body: {answer}"
                );
            }
        }
        let (_, stored) = call(&h.router, "GET", &format!("/v1/reminders/{id}"), None).await;
        let subject = stored["content"]["subject"].as_str().unwrap();
        assert!(subject == "Body A" || subject == "Body B");
        assert_eq!(
            stored["content"]["body"],
            format!("{subject}, in full"),
            "never a mix: {stored}"
        );
    }
}

#[tokio::test]
async fn storage_failures_are_503_to_retry_and_unreadable_answers_500() {
    let h = Harness::new();
    h.put("r-3", body("u-1", "Pickup")).await;
    h.ledger_faults.fail(LEDGER_GET, FaultPoint::Before, 1);
    let (status, answer) = call(&h.router, "GET", "/v1/reminders/r-3", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert_eq!(answer["error"]["code"], "unavailable");
    let broken = Harness::with_corrupt_ledger();
    broken.put("r-4", body("u-1", "Pickup")).await;
    let (status, answer) = call(&broken.router, "GET", "/v1/reminders/r-4", None).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{answer}");
    assert_eq!(answer["error"]["code"], "internal");
}

/// A preferences body's errors name the field, never a key the caller typed (a key may be
/// anything, an address even), and a window's unknown fields are refused.
#[tokio::test]
async fn bad_preferences_name_the_field_and_never_the_callers_keys() {
    let h = Harness::new();
    let window = json!({"start": "22:00", "end": "07:00", "zone": "Europe/Paris"});
    let mut extra = window.clone();
    extra["secret.person@example.org"] = json!(1);
    let cases = [
        (
            json!({"quiet_hours": {"secret.person@example.org": window}}),
            "quiet_hours",
        ),
        (json!({"quiet_hours": {"push": extra}}), "quiet_hours.push"),
        (
            json!({"quiet_hours": {"push": {"start": "22:00", "end": "07:00"}}}),
            "quiet_hours.push",
        ),
        (
            json!({"quiet_hours": {"push": {"start": "22:00", "end": "07:00", "zone": "Secret/Place"}}}),
            "quiet_hours.push.zone",
        ),
    ];
    for (i, (body, field)) in cases.into_iter().enumerate() {
        let (status, e) = call(
            &h.router,
            "PUT",
            "/v1/subscribers/u-1/preferences",
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "case {i}: {e}");
        assert!(
            e["error"]["field"].as_str().unwrap().starts_with(field),
            "case {i}: {e}"
        );
        let text = e.to_string();
        assert!(
            !text.contains("secret") && !text.contains("Secret"),
            "case {i} echoes: {text}"
        );
    }
    let (status, _) = call(&h.router, "GET", "/v1/subscribers/u-1/preferences", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing stored");
}

/// A body that is not JSON at all (cut short, a stray comma, plain text) answers 400 naming
/// `body` and where the JSON broke, for a reminder and for a series alike.
#[tokio::test]
async fn a_body_that_is_not_json_answers_400_naming_the_body() {
    let h = Harness::new();
    let cut_short = r#"{"subscriber_id": "u-1", "channels": "#;
    let stray_comma = r#"{"subscriber_id": "u-1",}"#;
    for (i, raw) in [cut_short, stray_comma, "pickup at 5"]
        .into_iter()
        .enumerate()
    {
        for uri in [
            format!("/v1/reminders/raw-{i}"),
            format!("/v1/series/raw-{i}"),
        ] {
            let (status, answer) = call_raw(&h.router, &[], "PUT", &uri, Some(raw.into())).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{uri} {raw}: {answer}");
            assert_eq!(answer["error"]["field"], "body", "{uri} {raw}: {answer}");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.starts_with("body: not valid JSON (line 1, column"),
                "{message}"
            );
        }
    }
}

/// A new reminder already stale when it arrives (due a day ago and fresh for an hour, or fresh
/// until a time past) could only expire: 400 naming the field the caller gave for it (its due
/// time when no freshness allowed would reach now), and nothing stored. A repeat of
/// one created while it was fresh, retried once its freshness passed (its answer lost), answers
/// its state as any repeat does.
#[tokio::test]
async fn a_reminder_stale_on_arrival_is_refused_naming_its_field_and_a_late_repeat_is_not() {
    use reminders::clock::Timestamp;
    use reminders_harness::ManualClock;
    let clock = ManualClock::at(Timestamp::parse_rfc3339("2029-12-31T10:00:00Z").unwrap());
    let h = Harness::at(clock.clone(), common::operator());
    // Due a day ago, fresh for an hour (a longer freshness would reach now).
    let stale = |f: &dyn Fn(&mut Value)| {
        let mut b = body("u-1", "Pickup");
        b["due_at"] = json!("2029-12-30T10:00:00Z");
        f(&mut b);
        b
    };
    let cases = [
        (stale(&|_| {}), "fresh_for_secs"),
        (
            stale(&|b| {
                b.as_object_mut().unwrap().remove("fresh_for_secs");
            }),
            "due_at",
        ),
        (
            stale(&|b| {
                b.as_object_mut().unwrap().remove("fresh_for_secs");
                b["fresh_until"] = json!("2029-12-30T11:00:00Z");
            }),
            "fresh_until",
        ),
        // No freshness allowed (a year at most) reaches now from 2020: the due time is at fault.
        (
            stale(&|b| {
                b["due_at"] = json!("2020-01-01T10:00:00Z");
                b["fresh_for_secs"] = json!(366 * 86_400);
            }),
            "due_at",
        ),
    ];
    for (n, (b, field)) in cases.into_iter().enumerate() {
        let id = format!("stale-{n}");
        let (status, answer) = h.put(&id, b).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("stale"), "{message}");
        let (status, _) = call(&h.router, "GET", &format!("/v1/reminders/{id}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "nothing stored for {field}");
    }
    // Created fresh (due 2030-01-01T10:00Z, fresh for an hour); the same PUT a day later.
    let (status, first) = h.put("late-repeat", body("u-1", "Pickup")).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    clock.set(Timestamp::parse_rfc3339("2030-01-02T10:00:00Z").unwrap());
    let (status, again) = h.put("late-repeat", body("u-1", "Pickup")).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["reminder_id"], "late-repeat");
}
