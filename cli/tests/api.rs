//! The HTTP API as an application uses it during development: `remindctl local api` against
//! the emulator, plain HTTP requests (what `curl` sends), the pipeline played by
//! `remindctl local run`, and the provider `remindctl local receive`.

use std::collections::BTreeMap;

use std::process::Command;

use serde_json::{json, Value};

mod common;
use common::{bin, free_port, send, stack, Running};

fn body(subscriber: &str, n: usize, due_ms: i64) -> Value {
    json!({
        "subscriber_id": subscriber,
        "due_at": due_ms,
        "fresh_for_secs": 600,
        "channels": {"email": format!("user{n}@example.org"), "sms": "+14155550100"},
        "content": {"subject": format!("Pickup {n}"), "body": "Your order is ready."},
    })
}

/// The wall clock, in epoch milliseconds.
fn epoch_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    i64::try_from(since.unwrap().as_millis()).unwrap()
}

/// `remindctl local run --until-idle` on `env`, waiting for work due within `horizon` seconds.
fn run_until_idle(env: &BTreeMap<String, String>, horizon: &str) {
    let run = Command::new(bin())
        .args([
            "local",
            "run",
            "--until-idle",
            "--schedule-period",
            "1",
            "--idle-horizon",
            horizon,
        ])
        .envs(env)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// A UTC clock reading `HH:MM` of an instant (epoch ms), for quiet windows around now.
fn hhmm(ms: i64) -> String {
    let mins = ms.div_euclid(60_000).rem_euclid(24 * 60);
    format!("{:02}:{:02}", mins / 60, mins % 60)
}

/// What the emulator tests of the recipient rules share: a local stack named after `prefix`,
/// the HTTP provider on `http_channels` answered by `local receive` (with `receive_args`),
/// every other channel off, and `local api` serving the router. The environment, both
/// processes, the API's base URL, an HTTP client and the time now (epoch ms).
fn local_stack(
    prefix: &str,
    http_channels: &[&str],
    receive_args: &[&str],
) -> (
    BTreeMap<String, String>,
    Running,
    Running,
    String,
    reqwest::Client,
    i64,
) {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let mut env = stack(&format!("{prefix}-{}", std::process::id()));
    let port = free_port();
    for channel in ["PUSH", "EMAIL", "SMS"] {
        let provider = if http_channels.contains(&channel) {
            "http"
        } else {
            "none"
        };
        env.insert(format!("{channel}_PROVIDER"), provider.into());
        if provider == "http" {
            env.insert(
                format!("{channel}_HTTP_ENDPOINT"),
                format!("http://127.0.0.1:{port}/send"),
            );
        }
    }
    let port = port.to_string();
    let mut args = vec!["local", "receive", "--port", &port];
    args.extend_from_slice(receive_args);
    let receiver = Running::start(&args, &env);
    receiver.first_line();
    let api = Running::start(&["local", "api", "--port", "0"], &env);
    let first = api.first_line();
    let base = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_owned();
    reminders::aws::bootstrap::install_crypto();
    let now_ms = epoch_ms();
    (env, receiver, api, base, reqwest::Client::new(), now_ms)
}

/// The dead reasons of the events `local events --json` printed, one event per line.
fn reasons(events: &str) -> Vec<String> {
    events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["detail"]["reason"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn local_api_creates_cancels_and_follows_reminders_through_the_pipeline() {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let mut env = stack(&format!("api-{}", std::process::id()));
    let port = free_port();
    env.insert("EMAIL_PROVIDER".into(), "http".into());
    env.insert(
        "EMAIL_HTTP_ENDPOINT".into(),
        format!("http://127.0.0.1:{port}/send"),
    );
    env.insert("SMS_PROVIDER".into(), "none".into());
    env.insert("PUSH_PROVIDER".into(), "none".into());
    let receiver = Running::start(&["local", "receive", "--port", &port.to_string()], &env);
    receiver.first_line();
    let api = Running::start(&["local", "api", "--port", "0"], &env);
    let first = api.first_line();
    let base = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    reminders::aws::bootstrap::install_crypto();
    let http = reqwest::Client::new();
    let put = |id: String, b: Value| {
        send(
            &http,
            reqwest::Method::PUT,
            format!("{base}/v1/reminders/{id}"),
            Some(b),
        )
    };
    let now_ms = epoch_ms();

    // 20 valid PUTs create; the same one again answers the same state.
    let mut states = Vec::new();
    for n in 0..20 {
        let (status, state) = put(format!("api-{n}"), body("u-42", n, now_ms)).await;
        assert_eq!(status, 201, "{state}");
        states.push(state);
    }
    let (status, again) = put("api-3".into(), body("u-42", 3, now_ms)).await;
    assert_eq!((status, &again), (200, &states[3]));
    // Stale already when it arrives (due two hours ago, fresh for a minute): it could only
    // expire, so it is refused naming the freshness it gave, and nothing is stored.
    let mut on_arrival = body("u-43", 98, now_ms - 7_200_000);
    on_arrival["fresh_for_secs"] = json!(60);
    let (status, refused) = put("api-stale-on-arrival".into(), on_arrival).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["field"], "fresh_for_secs", "{refused}");
    // Fresh for a few more seconds when created, stale before the scheduler ever takes it:
    // expired unsent, on the ledger too. Its times from the clock read just before its PUT.
    let fresh_until_ms = epoch_ms() + 5_000;
    let mut stale = body("u-43", 99, fresh_until_ms - 60_000);
    stale["fresh_for_secs"] = json!(60);
    let (status, stale) = put("api-stale".into(), stale).await;
    assert_eq!(status, 201, "{stale}");
    // Past its freshness and the clocks' one-second margin before the pipeline runs.
    while epoch_ms() < fresh_until_ms + 1_500 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // 10 bad bodies: 400 naming the field, never echoing a recipient.
    let bad: Vec<(Value, &str)> = vec![
        (json!({"subscriber_id": "u-42"}), "due_at"),
        (
            json!({"subscriber_id": "u-42", "due_at": now_ms, "channels": {"sms": "555-0100"}, "content": {"subject": "s", "body": "b"}}),
            "channels.sms",
        ),
        (
            json!({"subscriber_id": "u-42", "due_at": now_ms, "channels": {"email": "secret.person@"}, "content": {"subject": "s", "body": "b"}}),
            "channels.email",
        ),
        (
            json!({"subscriber_id": "u-42", "due_at": now_ms, "channels": {"push": "tok en"}, "content": {"subject": "s", "body": "b"}}),
            "channels.push",
        ),
        (
            json!({"subscriber_id": "u-42", "due_at": now_ms, "channels": {"fax": "+14155550100"}, "content": {"subject": "s", "body": "b"}}),
            "channels",
        ),
        (
            json!({"subscriber_id": "u-42", "due_at": "soon", "channels": {"email": "a@example.org"}, "content": {"subject": "s", "body": "b"}}),
            "due_at",
        ),
        (
            json!({"subscriber_id": "u-42", "due_at": now_ms, "fresh_for_secs": -5, "channels": {"email": "a@example.org"}, "content": {"subject": "s", "body": "b"}}),
            "fresh_for_secs",
        ),
        (
            json!({"subscriber_id": "u-42", "due_at": now_ms, "channels": {"email": "a@example.org"}, "content": {"subject": "s"}}),
            "content",
        ),
        (
            json!({"subscriber_id": "", "due_at": now_ms, "channels": {"email": "a@example.org"}, "content": {"subject": "s", "body": "b"}}),
            "subscriber_id",
        ),
        (
            json!({"subscriber_id": "u-42", "due_at": now_ms, "not_before": now_ms + 3_600_000, "fresh_until": now_ms + 60_000, "channels": {"email": "a@example.org"}, "content": {"subject": "s", "body": "b"}}),
            "not_before",
        ),
    ];
    for (i, (b, field)) in bad.into_iter().enumerate() {
        let (status, answer) = put(format!("bad-{i}"), b).await;
        assert_eq!(status, 400, "case {i}: {answer}");
        assert_eq!(answer["error"]["field"], field, "case {i}: {answer}");
        let text = answer.to_string();
        for secret in ["555-0100", "secret.person", "tok en", "+14155550100"] {
            assert!(
                !text.contains(secret),
                "case {i} echoes a recipient: {text}"
            );
        }
    }

    // A DELETE cancels before anything was sent.
    let (status, cancel) = send(
        &http,
        reqwest::Method::DELETE,
        format!("{base}/v1/reminders/api-7"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{cancel}");
    assert_eq!(
        cancel["channels"],
        json!({"email": "cancelled", "sms": "cancelled"})
    );

    // A horizon that covers a retry: on a loaded machine a send can time out after it was
    // written (ambiguous), and its retry comes back within the backoff (under 20 s here).
    run_until_idle(&env, "120");

    let received = receiver.lines().join("\n");
    for n in 0..20 {
        let (status, state) = send(
            &http,
            reqwest::Method::GET,
            format!("{base}/v1/reminders/api-{n}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{state}");
        let (email, sms) = (&state["channels"]["email"], &state["channels"]["sms"]);
        let key = email["delivery_key"].as_str().unwrap();
        if n == 7 {
            assert_eq!(state["status"], "cancelled", "{state}");
            assert_eq!(state["outcome"], "cancelled", "{state}");
            assert_eq!(email["status"], "cancelled", "{state}");
            assert_eq!(sms["status"], "cancelled", "{state}");
            assert!(
                !received.contains(key),
                "the cancelled reminder was sent:\n{received}"
            );
            continue;
        }
        assert_eq!(email["status"], "delivered", "{state}");
        assert!(email["delivered_at"].is_string(), "{state}");
        assert_eq!(email["recipient"], format!("u***@example.org"));
        assert!(
            received.contains(key),
            "the provider saw {key}:\n{received}"
        );
        assert_eq!(sms["status"], "dead", "{state}");
        assert_eq!(sms["dead_reason"], "rejected", "SMS_PROVIDER=none: {state}");
        // Status says the scheduler handed it on; the outcome, what became of it: the email
        // reached the person, the SMS (no fallback order) did not.
        assert_eq!(state["status"], "enqueued", "{state}");
        assert_eq!(state["outcome"], "partly_delivered", "{state}");
    }

    // One event per settled delivery, through `remindctl local events`, with the keys the
    // ledger (and, for the delivered ones, the provider) has; never a recipient.
    let out = Command::new(bin())
        .args(["local", "events", "--json", "--wait", "10"])
        .envs(&env)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut settled: BTreeMap<String, BTreeMap<u64, String>> = BTreeMap::new();
    for e in &events {
        assert_eq!(e["source"], "reminders");
        assert_eq!(e["detail-type"], "Reminder Delivery Settled");
        let text = e.to_string();
        assert!(
            !text.contains("example.org") && !text.contains("+1415"),
            "{text}"
        );
        let d = &e["detail"];
        let outcome = match d["reason"].as_str() {
            Some(reason) => format!("{}:{reason}", d["outcome"].as_str().unwrap()),
            None => d["outcome"].as_str().unwrap().to_owned(),
        };
        let key = d["delivery_key"].as_str().unwrap().to_owned();
        let again = settled
            .entry(key)
            .or_default()
            .insert(d["transition"].as_u64().unwrap(), outcome.clone());
        // At least once: a repeat carries the same key, transition and outcome.
        assert!(again.is_none_or(|before| before == outcome), "{text}");
    }
    assert_eq!(
        settled.len(),
        42,
        "21 reminders x 2 channels, one settling each: {settled:?}"
    );
    for channel in ["email", "sms"] {
        let key = stale["channels"][channel]["delivery_key"].as_str().unwrap();
        assert_eq!(
            settled[key].values().collect::<Vec<_>>(),
            ["expired"],
            "{key}"
        );
        assert!(!received.contains(key), "{key}");
    }
    let (_, shown) = send(
        &http,
        reqwest::Method::GET,
        format!("{base}/v1/reminders/api-stale"),
        None,
    )
    .await;
    assert_eq!(shown["status"], "expired", "{shown}");
    assert_eq!(shown["channels"]["email"]["status"], "expired", "{shown}");

    // Every channel of api-0 has settled: a different body would send nothing (409); the
    // same body is still the same (200).
    let (status, conflict) = put("api-0".into(), body("u-42", 1000, now_ms)).await;
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(conflict["error"]["field"], "status", "{conflict}");
    let (status, _) = put("api-0".into(), body("u-42", 0, now_ms)).await;
    assert_eq!(status, 200);
    for (n, state) in states.iter().enumerate() {
        for channel in ["email", "sms"] {
            let key = state["channels"][channel]["delivery_key"].as_str().unwrap();
            let transitions = &settled[key];
            assert_eq!(transitions.len(), 1, "{key}: {transitions:?}");
            let outcome = transitions.values().next().unwrap();
            let want = match (n, channel) {
                (7, _) => "cancelled",
                (_, "email") => "delivered",
                _ => "dead:rejected",
            };
            assert_eq!(outcome, want, "{key}");
            if want == "delivered" {
                assert!(received.contains(key), "{key}");
            }
        }
    }

    // The subscriber's reminders, newest due first, two pages.
    let (status, page) = send(
        &http,
        reqwest::Method::GET,
        format!("{base}/v1/subscribers/u-42/reminders?limit=15"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["reminders"].as_array().unwrap().len(), 15);
    let cursor = page["next_cursor"].as_str().expect("a second page");
    let (_, rest) = send(
        &http,
        reqwest::Method::GET,
        format!("{base}/v1/subscribers/u-42/reminders?limit=15&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(rest["reminders"].as_array().unwrap().len(), 5, "{rest}");
    assert_eq!(rest["next_cursor"], Value::Null, "{rest}");
    // A last page that is exactly full says so: no cursor to an empty page.
    let url = |q: &str| format!("{base}/v1/subscribers/u-42/reminders?limit=10{q}");
    let (_, first) = send(&http, reqwest::Method::GET, url(""), None).await;
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    let (_, last) = send(
        &http,
        reqwest::Method::GET,
        url(&format!("&cursor={cursor}")),
        None,
    )
    .await;
    assert_eq!(last["reminders"].as_array().unwrap().len(), 10, "{last}");
    assert_eq!(last["next_cursor"], Value::Null, "{last}");
    drop(api);
}

/// A subscriber's preferences through the API, honoured by the pipeline on the emulator: an
/// opted-out channel is never sent (dead `opted_out`, no attempt, an event saying so), a
/// delivery inside quiet hours waits for their end (deferred, nothing spent), and one stale
/// before they end is dead `expired_quiet_hours`.
#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn preferences_set_through_the_api_are_honoured_by_the_pipeline() {
    let (env, receiver, api, base, http, now_ms) = local_stack("prefs", &["EMAIL", "SMS"], &[]);
    // A UTC window from an hour ago to an hour from now: quiet now, for email.
    let prefs = json!({
        "opted_out": ["sms"],
        "quiet_hours": {"email": {"start": hhmm(now_ms - 3_600_000), "end": hhmm(now_ms + 3_600_000), "zone": "UTC"}}
    });
    let url = format!("{base}/v1/subscribers/u-7/preferences");
    let (status, stored) = send(
        &http,
        reqwest::Method::PUT,
        url.clone(),
        Some(prefs.clone()),
    )
    .await;
    assert_eq!(status, 200, "{stored}");
    let (_, shown) = send(&http, reqwest::Method::GET, url, None).await;
    assert_eq!(shown["opted_out"], json!(["sms"]), "{shown}");
    // Held: fresh for three hours, so still fresh when the window ends.
    let mut held = body("u-7", 1, now_ms);
    held["fresh_for_secs"] = json!(3 * 3600);
    let put = |id: &str, b: Value| {
        send(
            &http,
            reqwest::Method::PUT,
            format!("{base}/v1/reminders/{id}"),
            Some(b),
        )
    };
    assert_eq!(put("held", held).await.0, 201);
    // Expired: fresh for 30 minutes, stale before the window ends.
    let mut short = body("u-7", 2, now_ms);
    short["fresh_for_secs"] = json!(1800);
    assert_eq!(put("short", short).await.0, 201);

    run_until_idle(&env, "0");

    let received = receiver.lines().join("\n");
    for id in ["held", "short"] {
        let (_, state) = send(
            &http,
            reqwest::Method::GET,
            format!("{base}/v1/reminders/{id}"),
            None,
        )
        .await;
        let sms = &state["channels"]["sms"];
        assert_eq!(sms["status"], "dead", "{state}");
        assert_eq!(sms["dead_reason"], "opted_out", "{state}");
        assert_eq!(sms["attempts"], 0, "{state}");
        assert!(
            !received.contains(sms["delivery_key"].as_str().unwrap()),
            "an opted-out channel was sent"
        );
        let email = &state["channels"]["email"];
        assert!(
            !received.contains(email["delivery_key"].as_str().unwrap()),
            "sent in quiet hours"
        );
        assert_eq!(email["attempts"], 0, "{state}");
        if id == "held" {
            assert_eq!(email["status"], "deferred", "{state}");
            let why = email["waiting_because"].as_str().unwrap();
            assert!(why.starts_with("quiet hours until"), "{state}");
            let at = reminders::clock::Timestamp::parse_rfc3339(
                email["next_attempt_at"].as_str().unwrap(),
            )
            .unwrap();
            // Until the window ends and the clock margin after it (docs/design.md, "Clock margin").
            let margin = reminders::domain::reminder::CLOCK_MARGIN.as_millis() as i64;
            let end = now_ms - now_ms.rem_euclid(60_000) + 3_600_000 + margin;
            assert_eq!(at.as_millis(), end, "held until the window ends: {state}");
        } else {
            assert_eq!(email["status"], "dead", "{state}");
            assert_eq!(email["dead_reason"], "expired_quiet_hours", "{state}");
        }
    }
    // The events say why, without a recipient.
    let out = Command::new(bin())
        .args(["local", "events", "--json", "--wait", "10"])
        .envs(&env)
        .output()
        .unwrap();
    let events = String::from_utf8(out.stdout).unwrap();
    let reasons = reasons(&events);
    assert!(reasons.contains(&"opted_out".to_owned()), "{events}");
    assert!(
        reasons.contains(&"expired_quiet_hours".to_owned()),
        "{events}"
    );
    drop(api);
}

/// A dead address: a provider's `410 Gone` suppresses the address, and the next reminder to
/// it is not sent — the ledger, `remind show` and the events say `suppressed`; the operator
/// lists the suppression (masked, hashed, never the address) and lifts it.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_410_suppresses_the_address_and_the_next_reminder_to_it_is_not_sent() {
    let dead = "user1@example.org";
    let (env, receiver, api, base, http, now_ms) =
        local_stack("gone", &["EMAIL", "SMS"], &["--gone", dead]);
    // Nothing here is held for later, so a horizon that covers a retry after an ambiguous send.
    let run = || run_until_idle(&env, "120");
    let state = |id: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            send(
                &http,
                reqwest::Method::GET,
                format!("{base}/v1/reminders/{id}"),
                None,
            )
            .await
            .1
        }
    };
    let put = |id: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let b = body("u-gone", 1, now_ms);
            send(
                &http,
                reqwest::Method::PUT,
                format!("{base}/v1/reminders/{id}"),
                Some(b),
            )
            .await
            .0
        }
    };

    assert_eq!(put("gone-first").await, 201);
    run();
    let s = state("gone-first").await;
    assert_eq!(s["channels"]["email"]["status"], "dead", "{s}");
    assert_eq!(s["channels"]["email"]["dead_reason"], "rejected", "{s}");
    assert_eq!(s["channels"]["sms"]["status"], "delivered", "{s}");
    assert!(receiver.lines().iter().any(|l| l.starts_with("gone email")));

    let list = Command::new(bin())
        .args(["suppression", "list", "--json"])
        .envs(&env)
        .output()
        .unwrap();
    let listed = String::from_utf8(list.stdout).unwrap();
    assert!(list.status.success(), "{listed}");
    assert!(!listed.contains(dead), "the address in clear: {listed}");
    let sups: Vec<Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(sups.len(), 1, "{listed}");
    assert_eq!(sups[0]["channel"], "email");
    assert_eq!(sups[0]["source"], "http_410");
    let hash = sups[0]["address_hash"].as_str().unwrap().to_owned();

    assert_eq!(put("gone-second").await, 201);
    run();
    let s = state("gone-second").await;
    let email = &s["channels"]["email"];
    assert_eq!(email["status"], "dead", "{s}");
    assert_eq!(email["dead_reason"], "suppressed", "{s}");
    assert_eq!(email["attempts"], 0, "{s}");
    assert_eq!(s["channels"]["sms"]["status"], "delivered", "{s}");
    let key = email["delivery_key"].as_str().unwrap();
    assert!(
        !receiver.lines().iter().any(|l| l.contains(key)),
        "a suppressed address was called"
    );
    let show = Command::new(bin())
        .args(["remind", "show", "--id", "gone-second"])
        .envs(&env)
        .output()
        .unwrap();
    let shown = String::from_utf8(show.stdout).unwrap();
    assert!(shown.contains("suppressed"), "{shown}");
    assert!(!shown.contains(dead), "{shown}");
    let events = Command::new(bin())
        .args(["local", "events", "--json", "--wait", "10"])
        .envs(&env)
        .output()
        .unwrap();
    let events = String::from_utf8(events.stdout).unwrap();
    assert!(
        reasons(&events).contains(&"suppressed".to_owned()),
        "{events}"
    );

    let lift = Command::new(bin())
        .args(["suppression", "remove", "--hash", &hash])
        .envs(&env)
        .output()
        .unwrap();
    assert!(lift.status.success());
    let again = Command::new(bin())
        .args(["suppression", "remove", "--hash", &hash])
        .envs(&env)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1), "lifted once");
    let bad = Command::new(bin())
        .args(["suppression", "remove", "--hash", "user1@example.org"])
        .envs(&env)
        .output()
        .unwrap();
    let err = String::from_utf8(bad.stderr).unwrap();
    assert!(err.contains("--hash"), "{err}");
    drop(api);
}

/// Fallback, on the emulator through the API: an opted-out channel is not sent and its fallback
/// is; quiet hours that outlast a 30-minute freshness hand the reminder to the fallback channel.
/// The ledger (GET, `remind show`) and the events tell the chain; a channel in standby behind a
/// delivered one is never sent.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn an_opted_out_or_quiet_channel_falls_back_to_the_next_one_on_the_emulator() {
    let (env, receiver, api, base, http, now_ms) = local_stack("fb", &["EMAIL", "SMS"], &[]);
    let put = |url: String, b: Value| {
        let http = http.clone();
        async move { send(&http, reqwest::Method::PUT, url, Some(b)).await.0 }
    };
    // u-out: opted out of SMS, SMS first then email. u-quiet: email quiet now (UTC, an hour
    // either side), email first then SMS. u-fine: SMS first then email, nothing in the way.
    let prefs = [
        (
            "u-out",
            json!({"opted_out": ["sms"], "fallback": ["sms", "email"]}),
        ),
        (
            "u-quiet",
            json!({"quiet_hours": {"email": {"start": hhmm(now_ms - 3_600_000),
                "end": hhmm(now_ms + 3_600_000), "zone": "UTC"}}, "fallback": ["email", "sms"]}),
        ),
        ("u-fine", json!({"fallback": ["sms", "email"]})),
    ];
    for (sub, p) in prefs {
        let url = format!("{base}/v1/subscribers/{sub}/preferences");
        assert_eq!(put(url, p).await, 200);
    }
    for (id, sub, n) in [
        ("fb-out", "u-out", 1),
        ("fb-quiet", "u-quiet", 2),
        ("fb-fine", "u-fine", 3),
    ] {
        let mut b = body(sub, n, now_ms);
        b["fresh_for_secs"] = json!(1800);
        assert_eq!(put(format!("{base}/v1/reminders/{id}"), b).await, 201);
    }
    let (_, before) = send(
        &http,
        reqwest::Method::GET,
        format!("{base}/v1/reminders/fb-fine"),
        None,
    )
    .await;
    assert_eq!(before["channels"]["email"]["status"], "standby", "{before}");
    assert_eq!(
        before["channels"]["email"]["standby_behind"], "sms",
        "{before}"
    );

    run_until_idle(&env, "120");
    let received = receiver.lines().join("\n");
    let get = |id: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            send(
                &http,
                reqwest::Method::GET,
                format!("{base}/v1/reminders/{id}"),
                None,
            )
            .await
            .1
        }
    };
    let sent = |s: &Value| received.contains(s["delivery_key"].as_str().unwrap());
    for (id, dead, reason, fallback) in [
        ("fb-out", "sms", "opted_out", "email"),
        ("fb-quiet", "email", "expired_quiet_hours", "sms"),
    ] {
        let s = get(id).await;
        let (d, f) = (&s["channels"][dead], &s["channels"][fallback]);
        assert_eq!(d["status"], "dead", "{s}");
        assert_eq!(d["dead_reason"], reason, "{s}");
        assert_eq!(d["fallback_to"], fallback, "{s}");
        assert_eq!(d["attempts"], 0, "{s}");
        assert!(!sent(d), "{id}: the {dead} channel was sent");
        assert_eq!(f["status"], "delivered", "{s}");
        assert_eq!(f["fallback_from"], dead, "{s}");
        let key = f["delivery_key"].as_str().unwrap();
        assert_eq!(received.matches(key).count(), 1, "{id}: fallback sent once");
    }
    let s = get("fb-fine").await;
    assert_eq!(s["channels"]["sms"]["status"], "delivered", "{s}");
    assert_eq!(s["channels"]["email"]["status"], "not_needed", "{s}");
    assert_eq!(s["channels"]["email"]["standby_behind"], "sms", "{s}");
    assert!(!sent(&s["channels"]["email"]), "standby was sent");

    let show = Command::new(bin())
        .args(["remind", "show", "--id", "fb-out"])
        .envs(&env)
        .output()
        .unwrap();
    let shown = String::from_utf8(show.stdout).unwrap();
    assert!(shown.contains("fell back to email"), "{shown}");
    assert!(shown.contains("the fallback of sms"), "{shown}");
    let events = Command::new(bin())
        .args(["local", "events", "--json", "--wait", "10"])
        .envs(&env)
        .output()
        .unwrap();
    let events = String::from_utf8(events.stdout).unwrap();
    let chained: Vec<Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["detail"]["reminder_id"] == "fb-out")
        .collect();
    assert!(
        chained
            .iter()
            .any(|e| e["detail"]["fallback_to"] == "email" && e["detail"]["reason"] == "opted_out"),
        "{events}"
    );
    assert!(
        chained
            .iter()
            .any(|e| e["detail"]["fallback_from"] == "sms" && e["detail"]["outcome"] == "delivered"),
        "{events}"
    );
    drop(api);
}

/// Quiet hours on the emulator, in real time: a delivery due inside its channel's window (in
/// Asia/Kolkata, a 30-minute offset) is held with nothing spent, and goes out when the window
/// ends, a minute or two later — not before. The ledger's history and `remind show` say why it
/// waited. (The 23:30 → 07:00 case itself runs on a virtual clock: tests/consumer/rules.rs.)
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_delivery_inside_quiet_hours_goes_out_when_they_end_on_the_emulator() {
    let (env, receiver, api, base, http, now_ms) = local_stack("quiet", &["EMAIL"], &[]);
    // Kolkata is UTC+05:30: the window opened in the last minute and closes at the start of
    // the minute after next.
    let kolkata = |ms: i64| {
        let mins = (ms + 330 * 60_000).div_euclid(60_000).rem_euclid(24 * 60);
        format!("{:02}:{:02}", mins / 60, mins % 60)
    };
    let ends_at = now_ms - now_ms.rem_euclid(60_000) + 120_000;
    let prefs = json!({"quiet_hours": {"email": {"start": kolkata(now_ms - 60_000),
        "end": kolkata(ends_at), "zone": "Asia/Kolkata"}}});
    let (status, _) = send(
        &http,
        reqwest::Method::PUT,
        format!("{base}/v1/subscribers/u-quiet/preferences"),
        Some(prefs),
    )
    .await;
    assert_eq!(status, 200);
    let mut b = body("u-quiet", 1, now_ms);
    b["channels"] = json!({"email": "user1@example.org"});
    b["fresh_for_secs"] = json!(3600);
    let (status, _) = send(
        &http,
        reqwest::Method::PUT,
        format!("{base}/v1/reminders/quiet-1"),
        Some(b),
    )
    .await;
    assert_eq!(status, 201);
    // Wait for work due within five minutes: the held message comes back when the window ends.
    run_until_idle(&env, "300");
    let (_, s) = send(
        &http,
        reqwest::Method::GET,
        format!("{base}/v1/reminders/quiet-1"),
        None,
    )
    .await;
    let email = &s["channels"]["email"];
    assert_eq!(email["status"], "delivered", "{s}");
    assert_eq!(email["attempts"], 1, "the wait spent nothing: {s}");
    let delivered =
        reminders::clock::Timestamp::parse_rfc3339(email["delivered_at"].as_str().unwrap())
            .unwrap();
    assert!(
        delivered.as_millis() >= ends_at,
        "sent at {delivered:?}, before the window ended at {ends_at}"
    );
    let key = email["delivery_key"].as_str().unwrap();
    assert_eq!(receiver.lines().join("\n").matches(key).count(), 1);
    let show = Command::new(bin())
        .args(["remind", "show", "--id", "quiet-1"])
        .envs(&env)
        .output()
        .unwrap();
    let shown = String::from_utf8(show.stdout).unwrap();
    assert!(
        shown.contains("held for the subscriber's quiet hours"),
        "{shown}"
    );
    drop(api);
}

/// `local api --trust-identity-header`, the real flag and wiring: the caller and its claims
/// come from the development headers, so a call without them is 401, another caller finds
/// nothing (404) and a missing scope is 403, as the deployed authorizer and router answer.
#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn local_api_trusting_identity_headers_applies_owners_and_scopes() {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let env = stack(&format!("trust-{}", std::process::id()));
    let api = Running::start(
        &["local", "api", "--port", "0", "--trust-identity-header"],
        &env,
    );
    let first = api.first_line();
    assert!(first.contains("x-reminders-caller"), "{first}");
    let base = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    reminders::aws::bootstrap::install_crypto();
    let http = reqwest::Client::new();
    let due = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 3_600_000;
    let as_caller = |caller: Option<&str>, scope: &str, method: reqwest::Method, path: &str| {
        let mut req = http.request(method, format!("{base}{path}"));
        if let Some(caller) = caller {
            req = req
                .header("x-reminders-caller", caller)
                .header("x-reminders-claims", json!({ "scope": scope }).to_string());
        }
        req
    };
    let all = "reminders/read reminders/write subscribers/preferences";
    let status = |r: reqwest::Response| r.status().as_u16();

    // No headers: the caller is unknown.
    let r = as_caller(None, "", reqwest::Method::GET, "/v1/reminders/t-1")
        .send()
        .await
        .unwrap();
    assert_eq!(status(r), 401);

    // app-a creates a reminder; app-b, with every scope, cannot reach it.
    let r = as_caller(
        Some("app-a"),
        all,
        reqwest::Method::PUT,
        "/v1/reminders/t-1",
    )
    .header("content-type", "application/json")
    .body(body("u-1", 1, due).to_string())
    .send()
    .await
    .unwrap();
    assert_eq!(status(r), 201);
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = as_caller(Some("app-b"), all, method.clone(), "/v1/reminders/t-1")
            .send()
            .await
            .unwrap();
        assert_eq!(status(r), 404, "{method} by another caller");
    }
    let r = as_caller(
        Some("app-a"),
        all,
        reqwest::Method::GET,
        "/v1/reminders/t-1",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(status(r), 200, "its owner still finds it, uncancelled");

    // A read-only token may not write: 403, naming the scope it lacks.
    let r = as_caller(
        Some("app-a"),
        "reminders/read",
        reqwest::Method::DELETE,
        "/v1/reminders/t-1",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("reminders/write"),
        "{e}"
    );

    // app-a's three series of u-1; app-b's page of them is empty, and its cursor (which ends
    // on one of app-a's) reveals neither its id nor its start, and is refused when altered.
    for id in ["insulin-u1", "walk-u1", "water-u1"] {
        let series = json!({
            "subscriber_id": "u-1",
            "rule": "FREQ=DAILY;BYHOUR=9",
            "zone": "Europe/Paris",
            "starts_at": "2030-01-01T08:00:00Z",
            "channels": {"email": "u1@example.org"},
            "content": {"subject": "x", "body": "y"},
        });
        let r = as_caller(
            Some("app-a"),
            all,
            reqwest::Method::PUT,
            &format!("/v1/series/{id}"),
        )
        .header("content-type", "application/json")
        .body(series.to_string())
        .send()
        .await
        .unwrap();
        assert_eq!(status(r), 201, "{id}");
    }
    let list = "/v1/subscribers/u-1/series?limit=1";
    let r = as_caller(Some("app-b"), all, reqwest::Method::GET, list)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let page: Value = r.json().await.unwrap();
    assert_eq!(page["series"], json!([]), "{page}");
    let cursor = page["next_cursor"].as_str().expect("a cursor").to_owned();
    use base64::Engine;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&cursor)
        .unwrap_or_default();
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
        }
    }
    let mut altered = raw.clone();
    altered[0] ^= 1;
    let altered = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(altered);
    let r = as_caller(
        Some("app-b"),
        all,
        reqwest::Method::GET,
        &format!("{list}&cursor={altered}"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["field"], "cursor", "{e}");
}
