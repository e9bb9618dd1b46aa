//! The generic HTTP provider, every status class and failure point, and the consumer running
//! end to end with it selected by configuration alone.

use std::collections::HashMap;
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::config::ConfigError;
use reminders::domain::{
    Channel, Content, DeliveryKey, NewReminder, Recipient, Reminder, ReminderId, SubscriberId,
};
use reminders::policy::Outcome;
use reminders::ports::{Provider, SendRequest};
use reminders::providers::{
    from_lookup, AnyProvider, HttpConfig, HttpProvider, Token, ALLOW_LOOPBACK_HTTP_VAR,
};
use reminders_harness::ManualClock;

use crate::server::{respond, respond_with, serve, Behaviour};

const NOW: Timestamp = Timestamp::from_millis(1_800_000_000_000);

/// An SDK configuration that never touches the network (the HTTP provider does not use it).
pub fn offline_sdk() -> aws_config::SdkConfig {
    aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build()
}

/// A request for the provider tests of other modules.
pub fn request_for_tests() -> SendRequest {
    request()
}

fn request() -> SendRequest {
    let reminder = ReminderId::parse("r-1").unwrap();
    let subscriber = SubscriberId::parse("s-1").unwrap();
    SendRequest {
        delivery_key: DeliveryKey::derive(&reminder, &subscriber, Channel::Email),
        recipient: Recipient::parse(Channel::Email, "person@example.com").unwrap(),
        content: Content::Text {
            subject: "Pickup".into(),
            body: "at 5pm".into(),
        },
        payload_version: 3,
    }
}

fn provider(url: &str, timeout_ms: u64) -> HttpProvider<ManualClock> {
    let cfg = HttpConfig {
        endpoint: url.parse().unwrap(),
        token: Token::Plain("s3cret-token".into()),
        timeout: Duration::from_millis(timeout_ms),
        idempotent: true,
        partition: "api.example".into(),
    };
    HttpProvider::new(cfg, ManualClock::at(NOW)).unwrap()
}

async fn send_to(script: Vec<Behaviour>) -> Outcome {
    let server = serve(script).await;
    provider(&server.url, 2_000).send(&request()).await
}

/// A 2xx with an endless body: delivered at once, without reading the body past the receipt
/// limit (reading it all would hold the record for the whole timeout and its memory).
#[tokio::test]
async fn an_endless_success_body_is_not_read_to_the_end() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/send", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        if let Some(Ok(mut conn)) = listener.incoming().next() {
            let mut buf = [0u8; 16384];
            let _ = conn.read(&mut buf);
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
            if conn.write_all(head.as_bytes()).is_err() {
                return;
            }
            let chunk = format!("{:x}\r\n{}\r\n", 65_536, " ".repeat(65_536));
            while conn.write_all(chunk.as_bytes()).is_ok() {}
        }
    });
    let started = std::time::Instant::now();
    let outcome = provider(&url, 8_000).send(&request()).await;
    assert_eq!(outcome, Outcome::Delivered { receipt: None });
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the body was read until the timeout: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn success_carries_the_receipt_and_the_contract_request() {
    let server = serve(vec![respond(202, r#"{"id":"msg-77"}"#)]).await;
    let outcome = provider(&server.url, 2_000).send(&request()).await;
    assert_eq!(
        outcome,
        Outcome::Delivered {
            receipt: Some("msg-77".into())
        }
    );
    let req = server.requests.lock().unwrap()[0].clone();
    assert!(
        req.head.starts_with("POST /v1/messages HTTP/1.1"),
        "{}",
        req.head
    );
    assert_eq!(
        req.header("idempotency-key"),
        Some(request().delivery_key.to_string())
    );
    assert_eq!(
        req.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        req.header("authorization").as_deref(),
        Some("Bearer s3cret-token")
    );
    let body: serde_json::Value = serde_json::from_str(&req.body).unwrap();
    assert_eq!(body["delivery_key"], request().delivery_key.as_str());
    assert_eq!(body["channel"], "email");
    assert_eq!(body["recipient"], "person@example.com");
    assert_eq!(body["subject"], "Pickup");
    assert_eq!(body["body"], "at 5pm");
    assert_eq!(body["payload_version"], 3);
}

#[tokio::test]
async fn already_accepted_is_delivered() {
    assert!(matches!(
        send_to(vec![respond(409, "")]).await,
        Outcome::Delivered { .. }
    ));
    assert_eq!(
        send_to(vec![respond(200, "not json")]).await,
        Outcome::Delivered { receipt: None }
    );
}

#[tokio::test]
async fn throttles_carry_retry_after_in_both_forms() {
    assert_eq!(
        send_to(vec![respond_with(429, ("Retry-After", "7"))]).await,
        Outcome::Throttled {
            retry_after: Some(NOW.plus(Duration::from_secs(7)))
        }
    );
    let date = httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + Duration::from_millis(NOW.as_millis() as u64 + 60_000),
    );
    assert_eq!(
        send_to(vec![respond_with(429, ("Retry-After", &date))]).await,
        Outcome::Throttled {
            retry_after: Some(NOW.plus(Duration::from_secs(60)))
        }
    );
    assert_eq!(
        send_to(vec![respond(429, "")]).await,
        Outcome::Throttled { retry_after: None }
    );
}

#[tokio::test]
async fn server_errors_and_408_are_transient_other_4xx_permanent() {
    for status in [408, 500, 502, 503] {
        let got = send_to(vec![respond(status, "")]).await;
        assert_eq!(
            got,
            Outcome::Transient {
                error: format!("http_{status}")
            }
        );
    }
    for status in [400, 401, 403, 404, 422] {
        let got = send_to(vec![respond(status, "")]).await;
        assert_eq!(
            got,
            Outcome::Permanent {
                error: format!("http_{status}")
            }
        );
        assert_eq!(got.gone(), None, "{status} says nothing of the address");
    }
    // The contract's 410 Gone: permanent, and the address is dead.
    let got = send_to(vec![respond(410, "")]).await;
    assert_eq!(
        got,
        Outcome::Gone {
            error: "http_410".into(),
            source: reminders::domain::SuppressionSource::Http410,
        }
    );
    assert_eq!(got.class(), reminders::policy::OutcomeClass::Permanent);
}

#[tokio::test]
async fn failure_before_the_request_is_written_is_transient() {
    // A port that was just free: nothing listens, the connection is refused.
    let url = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/x", l.local_addr().unwrap())
    };
    assert_eq!(
        provider(&url, 1_000).send(&request()).await,
        Outcome::Transient {
            error: "connect_failed".into()
        }
    );
}

/// A TLS handshake that never completes: the request was never written, so a timeout here
/// is transient, not ambiguous.
#[tokio::test]
async fn a_timeout_before_the_request_is_written_is_transient() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/x", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock); // accept, then say nothing
        }
    });
    let got = provider(&url, 600).send(&request()).await;
    assert_eq!(
        got,
        Outcome::Transient {
            error: "connect_failed".into()
        }
    );
}

#[tokio::test]
async fn timeout_or_drop_after_the_request_is_written_is_ambiguous() {
    let server = serve(vec![Behaviour::Hang]).await;
    let got = provider(&server.url, 300).send(&request()).await;
    assert_eq!(
        got,
        Outcome::Ambiguous {
            error: "timeout_after_write".into()
        }
    );
    assert_eq!(
        server.requests.lock().unwrap().len(),
        1,
        "the request was written"
    );
    let server = serve(vec![Behaviour::Drop]).await;
    let got = provider(&server.url, 2_000).send(&request()).await;
    assert!(matches!(got, Outcome::Ambiguous { .. }), "{got:?}");
}

#[test]
fn configuration_names_what_is_missing_or_wrong_and_hides_the_token() {
    let env = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let load = |m: HashMap<String, String>| {
        from_lookup(
            move |k| m.get(k).cloned(),
            ManualClock::at(NOW),
            Duration::from_secs(5),
            &offline_sdk(),
        )
    };
    let base = [("PUSH_PROVIDER", "none"), ("SMS_PROVIDER", "none")];
    let err = load(env(&base)).unwrap_err();
    assert_eq!(err, ConfigError::Missing("EMAIL_PROVIDER"));
    let mut with_http = base.to_vec();
    with_http.push(("EMAIL_PROVIDER", "http"));
    assert_eq!(
        load(env(&with_http)).unwrap_err(),
        ConfigError::Missing("EMAIL_HTTP_ENDPOINT")
    );
    let mut bad = with_http.clone();
    bad.push(("EMAIL_HTTP_ENDPOINT", "ftp://x"));
    assert!(matches!(
        load(env(&bad)).unwrap_err(),
        ConfigError::Invalid {
            var: "EMAIL_HTTP_ENDPOINT",
            ..
        }
    ));
    // Plain http would carry the recipient, the content and the token unencrypted: refused
    // unless the receiver is on loopback (a local run's), even with the local permission.
    for plain in ["http://api.example/v1/send", "http://10.0.0.7/send"] {
        let mut bad = with_http.clone();
        bad.push(("EMAIL_HTTP_ENDPOINT", plain));
        bad.push((ALLOW_LOOPBACK_HTTP_VAR, "1"));
        match load(env(&bad)).unwrap_err() {
            ConfigError::Invalid { var, problem } => {
                assert_eq!(var, "EMAIL_HTTP_ENDPOINT");
                assert!(problem.contains("https"), "{problem}");
            }
            other => panic!("{plain}: {other:?}"),
        }
    }
    for local in [
        "http://127.0.0.1:9/send",
        "http://localhost:9/send",
        "http://[::1]:9/",
    ] {
        let mut plain = with_http.clone();
        plain.push(("EMAIL_HTTP_ENDPOINT", local));
        // Off Lambda but not asked for (a consumer on ECS or EC2): refused, naming the
        // setting that would allow it.
        match load(env(&plain)).unwrap_err() {
            ConfigError::Invalid { var, problem } => {
                assert_eq!(var, "EMAIL_HTTP_ENDPOINT");
                assert!(
                    problem.contains("REMINDERS_ALLOW_LOOPBACK_HTTP=1"),
                    "{problem}"
                );
            }
            other => panic!("{local} without the setting: {other:?}"),
        }
        let mut ok = plain.clone();
        ok.push((ALLOW_LOOPBACK_HTTP_VAR, "1"));
        assert!(load(env(&ok)).is_ok(), "{local}");
        // On Lambda, never: not even loopback, not even asked for.
        ok.push(("AWS_LAMBDA_FUNCTION_NAME", "reminders-consumer"));
        match load(env(&ok)).unwrap_err() {
            ConfigError::Invalid { var, problem } => {
                assert_eq!(var, "EMAIL_HTTP_ENDPOINT");
                assert!(problem.contains("https on Lambda"), "{problem}");
            }
            other => panic!("{local} on Lambda: {other:?}"),
        }
        // A value other than 1 is a mistake, named as such (not read as "no").
        let mut odd = plain;
        odd.push((ALLOW_LOOPBACK_HTTP_VAR, "yes"));
        match load(env(&odd)).unwrap_err() {
            ConfigError::Invalid { var, problem } => {
                assert_eq!(var, ALLOW_LOOPBACK_HTTP_VAR);
                assert!(problem.contains("use 1"), "{problem}");
            }
            other => panic!("{local} with yes: {other:?}"),
        }
    }
    let mut good = with_http;
    good.push(("EMAIL_HTTP_ENDPOINT", "https://api.example/v1/send"));
    good.push(("EMAIL_HTTP_TOKEN", "top-secret"));
    let providers = load(env(&good)).unwrap();
    let AnyProvider::Http(p) = &providers.email else {
        panic!("email is http")
    };
    assert!(p.honours_idempotency_key());
    assert_eq!(
        p.partition(Channel::Email).item_key(),
        "gate#email#api.example"
    );
    assert!(
        !format!("{p:?}").contains("top-secret"),
        "token never shown"
    );
    assert!(matches!(providers.sms, AnyProvider::Disabled));
}

/// Every variable the providers read is declared (the template test relies on the list).
#[test]
fn providers_read_only_declared_variables() {
    let asked = std::sync::Mutex::new(std::collections::BTreeSet::new());
    for kind in ["http", "ses", "sns", "none"] {
        let _ = from_lookup(
            |k| {
                asked.lock().unwrap().insert(k.to_owned());
                if k.ends_with("_PROVIDER") {
                    return Some(kind.to_owned());
                }
                if k.ends_with("_HTTP_ENDPOINT") {
                    return Some("https://api.example/send".to_owned());
                }
                if k == "EMAIL_SES_FROM" {
                    return Some("from@example.com".to_owned());
                }
                None
            },
            ManualClock::at(NOW),
            Duration::from_secs(5),
            &offline_sdk(),
        );
    }
    let asked = asked.into_inner().unwrap();
    for k in &asked {
        assert!(
            reminders::providers::VARS.contains(&k.as_str())
                || reminders::providers::LOCAL_ONLY_VARS.contains(&k.as_str())
                // Set by Lambda itself: plain tokens are refused there.
                || k == "AWS_LAMBDA_FUNCTION_NAME",
            "{k} is read but not declared"
        );
    }
    assert!(asked.len() >= 15, "{asked:?}");
}

/// The consumer, with its provider chosen by configuration alone, delivers through HTTP.
#[tokio::test]
async fn the_consumer_delivers_end_to_end_through_the_configured_http_provider() {
    let server = serve(vec![respond(429, ""), respond(201, r#"{"id":"e2e-1"}"#)]).await;
    let w = crate::world::World::from_env(
        &[
            ("PUSH_PROVIDER", "none"),
            ("SMS_PROVIDER", "none"),
            ("EMAIL_PROVIDER", "http"),
            ("EMAIL_HTTP_ENDPOINT", server.url.as_str()),
            (ALLOW_LOOPBACK_HTTP_VAR, "1"),
        ],
        NOW,
        &offline_sdk(),
    );
    let r = Reminder::new(
        NewReminder {
            reminder_id: ReminderId::parse("e2e").unwrap(),
            subscriber_id: SubscriberId::parse("s").unwrap(),
            due_at: NOW,
            fresh_until: None,
            content: Content::Text {
                subject: "Hi".into(),
                body: "there".into(),
            },
            recipients: vec![Recipient::parse(Channel::Email, "p@example.com").unwrap()],
        },
        Duration::from_secs(3600),
        Duration::from_secs(3600),
    )
    .unwrap();
    let msg = w.enqueue(&r, Channel::Email).await;
    let mut delivered = 0;
    for _ in 0..5 {
        if let Some(out) = w.poll(Channel::Email).await {
            delivered += out.metrics.get(Channel::Email).delivered;
        }
        w.clock.advance(Duration::from_secs(10));
    }
    assert_eq!(delivered, 1);
    let rec = w.record(&msg.delivery_key).await;
    assert_eq!(rec.provider_receipt(), Some("e2e-1"));
    assert_eq!(rec.throttle_count(), 1);
    assert_eq!(server.requests.lock().unwrap().len(), 2);
}
