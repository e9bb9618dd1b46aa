//! Bearer tokens from Secrets Manager (the emulator's): read once, cached, read again after a
//! 401 so a rotated secret is picked up; and the configuration rules around plain tokens.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::config::ConfigError;
use reminders::policy::Outcome;
use reminders::ports::Provider;
use reminders::providers::{from_lookup, HttpConfig, HttpProvider, SecretToken, Token};
use reminders_harness::ManualClock;

use crate::server::{respond, serve_fn};

const NOW: Timestamp = Timestamp::from_millis(1_800_000_000_000);

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_secret_token_is_read_once_and_again_after_a_401() {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let sdk = reminders::aws::sdk_config().await;
    let sm = aws_sdk_secretsmanager::Client::new(&sdk);
    let name = format!("push-token-{}-{}", std::process::id(), NOW.as_millis());
    let arn = sm
        .create_secret()
        .name(&name)
        .secret_string("first")
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    // The remote accepts whatever token the secret holds now.
    let valid = Arc::new(std::sync::Mutex::new("first".to_owned()));
    let v = valid.clone();
    let server = serve_fn(Arc::new(move |req| {
        let want = format!("Bearer {}", v.lock().unwrap());
        match req.header("authorization") {
            Some(got) if got == want => respond(200, r#"{"id":"ok"}"#),
            _ => respond(401, ""),
        }
    }))
    .await;
    let cfg = HttpConfig {
        endpoint: server.url.parse().unwrap(),
        token: Token::Secret(SecretToken::new(&sdk, arn.clone())),
        timeout: Duration::from_secs(2),
        idempotent: true,
        partition: "api.example".into(),
    };
    let provider = HttpProvider::new(cfg, ManualClock::at(NOW)).unwrap();
    let request = super::http::request_for_tests();
    assert!(matches!(
        provider.send(&request).await,
        Outcome::Delivered { .. }
    ));
    // Rotated: the cached token is refused once, then the secret is read again.
    sm.put_secret_value()
        .secret_id(&arn)
        .secret_string("second")
        .send()
        .await
        .unwrap();
    *valid.lock().unwrap() = "second".into();
    assert_eq!(
        provider.send(&request).await,
        Outcome::Transient {
            error: "http_401".into()
        }
    );
    assert!(matches!(
        provider.send(&request).await,
        Outcome::Delivered { .. }
    ));
    let sent: Vec<String> = server
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default())
        .collect();
    assert_eq!(sent, ["Bearer first", "Bearer first", "Bearer second"]);
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn an_unreadable_secret_sends_nothing_and_is_transient() {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let sdk = reminders::aws::sdk_config().await;
    let server = serve_fn(Arc::new(|_| respond(200, ""))).await;
    let cfg = HttpConfig {
        endpoint: server.url.parse().unwrap(),
        token: Token::Secret(SecretToken::new(
            &sdk,
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing-AbCdEf".into(),
        )),
        timeout: Duration::from_secs(2),
        idempotent: true,
        partition: "api.example".into(),
    };
    let provider = HttpProvider::new(cfg, ManualClock::at(NOW)).unwrap();
    assert_eq!(
        provider.send(&super::http::request_for_tests()).await,
        Outcome::Transient {
            error: "token_unavailable".into()
        }
    );
    assert!(server.requests.lock().unwrap().is_empty());
}

#[test]
fn plain_tokens_are_for_local_runs_only() {
    let load = |pairs: &[(&str, &str)]| {
        let m: HashMap<String, String> = [
            ("PUSH_PROVIDER", "http"),
            ("PUSH_HTTP_ENDPOINT", "https://push.example/send"),
            ("EMAIL_PROVIDER", "none"),
            ("SMS_PROVIDER", "none"),
        ]
        .iter()
        .chain(pairs)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        from_lookup(
            move |k| m.get(k).cloned(),
            ManualClock::at(NOW),
            Duration::from_secs(5),
            &super::http::offline_sdk(),
        )
        .map(|_| ())
    };
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:push-AbCdEf";
    assert_eq!(load(&[("PUSH_HTTP_TOKEN", "t")]), Ok(()), "local run");
    assert_eq!(load(&[("PUSH_HTTP_TOKEN_SECRET_ARN", arn)]), Ok(()));
    let on_lambda = load(&[
        ("PUSH_HTTP_TOKEN", "t"),
        ("AWS_LAMBDA_FUNCTION_NAME", "consumer"),
    ])
    .unwrap_err();
    assert!(
        matches!(&on_lambda, ConfigError::Invalid { var: "PUSH_HTTP_TOKEN", problem } if problem.contains("PUSH_HTTP_TOKEN_SECRET_ARN")),
        "{on_lambda:?}"
    );
    assert!(matches!(
        load(&[
            ("PUSH_HTTP_TOKEN", "t"),
            ("PUSH_HTTP_TOKEN_SECRET_ARN", arn)
        ]),
        Err(ConfigError::Invalid {
            var: "PUSH_HTTP_TOKEN",
            ..
        })
    ));
    assert!(matches!(
        load(&[("PUSH_HTTP_TOKEN_SECRET_ARN", "push-token")]),
        Err(ConfigError::Invalid {
            var: "PUSH_HTTP_TOKEN_SECRET_ARN",
            ..
        })
    ));
}
