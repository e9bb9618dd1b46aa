//! SES v2 and SNS providers on the emulator: success, typed-error classification (moto answers
//! `MessageRejected` for an unverified sender and `EndpointDisabled` for a disabled push
//! endpoint), no SDK retry on a refused connection, and the consumer end to end with each
//! provider selected by configuration alone.

use std::sync::Arc;
use std::time::Duration;

use reminders::clock::{SystemClock, Timestamp};
use reminders::domain::{
    Channel, Content, DeliveryKey, NewReminder, Recipient, Reminder, ReminderId, SubscriberId,
};
use reminders::policy::Outcome;
use reminders::ports::{Provider, SendRequest};
use reminders::providers::{
    sdk::no_retries, SesConfig, SesProvider, SnsPushConfig, SnsPushProvider, SnsSmsConfig,
    SnsSmsProvider,
};

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}{}x{nanos}", std::process::id())
}

async fn sdk() -> aws_config::SdkConfig {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    no_retries(&reminders::aws::sdk_config().await, Duration::from_secs(5))
}

fn request(channel: Channel, recipient: &str) -> SendRequest {
    let r = ReminderId::parse("r-1").unwrap();
    let s = SubscriberId::parse("s-1").unwrap();
    SendRequest {
        delivery_key: DeliveryKey::derive(&r, &s, channel),
        recipient: Recipient::parse(channel, recipient).unwrap(),
        content: Content::Text {
            subject: "Pickup".into(),
            body: "at 5pm".into(),
        },
        payload_version: 1,
    }
}

async fn verified_sender(sdk: &aws_config::SdkConfig) -> String {
    let from = format!("{}@example.com", unique("sender"));
    aws_sdk_sesv2::Client::new(sdk)
        .create_email_identity()
        .email_identity(&from)
        .send()
        .await
        .unwrap();
    from
}

fn ses(sdk: &aws_config::SdkConfig, from: &str) -> SesProvider<SystemClock> {
    let cfg = SesConfig {
        from: from.into(),
        configuration_set: None,
        partition: "ses:example.com".into(),
    };
    SesProvider::new(sdk, cfg, SystemClock)
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn ses_delivers_from_a_verified_sender() {
    let sdk = sdk().await;
    let from = verified_sender(&sdk).await;
    let got = ses(&sdk, &from)
        .send(&request(Channel::Email, "to@example.com"))
        .await;
    assert!(
        matches!(&got, Outcome::Delivered { receipt: Some(id) } if !id.is_empty()),
        "{got:?}"
    );
    assert!(!ses(&sdk, &from).honours_idempotency_key());
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn ses_rejects_an_unverified_sender_permanently() {
    let sdk = sdk().await;
    let got = ses(&sdk, "nobody-verified@unverified.example")
        .send(&request(Channel::Email, "to@example.com"))
        .await;
    assert_eq!(
        got,
        Outcome::Permanent {
            error: "ses_MessageRejected".into()
        }
    );
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn sns_publishes_an_sms() {
    let sdk = sdk().await;
    let cfg = SnsSmsConfig {
        sms_type: "Transactional".into(),
        sender_id: None,
        partition: "sns-sms".into(),
    };
    let got = SnsSmsProvider::new(&sdk, cfg, SystemClock)
        .send(&request(Channel::Sms, "+14155550123"))
        .await;
    assert!(
        matches!(got, Outcome::Delivered { receipt: Some(_) }),
        "{got:?}"
    );
}

async fn platform_app(sdk: &aws_config::SdkConfig) -> String {
    aws_sdk_sns::Client::new(sdk)
        .create_platform_application()
        .name(unique("app"))
        .platform("GCM")
        .attributes("PlatformCredential", "test-key")
        .send()
        .await
        .unwrap()
        .platform_application_arn
        .unwrap()
}

fn push(sdk: &aws_config::SdkConfig, app: &str) -> SnsPushProvider<SystemClock> {
    let cfg = SnsPushConfig {
        platform_application_arn: Some(app.into()),
        partition: app.into(),
    };
    SnsPushProvider::new(sdk, cfg, SystemClock)
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn sns_push_delivers_to_a_token_and_rejects_a_disabled_endpoint() {
    let sdk = sdk().await;
    let app = platform_app(&sdk).await;
    let token = unique("token");
    let ok = push(&sdk, &app).send(&request(Channel::Push, &token)).await;
    assert!(
        matches!(ok, Outcome::Delivered { receipt: Some(_) }),
        "{ok:?}"
    );
    let sns = aws_sdk_sns::Client::new(&sdk);
    let endpoint = sns
        .create_platform_endpoint()
        .platform_application_arn(&app)
        .token(unique("other"))
        .send()
        .await
        .unwrap()
        .endpoint_arn
        .unwrap();
    sns.set_endpoint_attributes()
        .endpoint_arn(&endpoint)
        .attributes("Enabled", "false")
        .send()
        .await
        .unwrap();
    let got = push(&sdk, &app)
        .send(&request(Channel::Push, &endpoint))
        .await;
    // A disabled endpoint is a dead address: permanent, and suppressed (docs/design.md,
    // "Suppressions").
    assert_eq!(
        got,
        Outcome::Gone {
            error: "sns_EndpointDisabled".into(),
            source: reminders::domain::SuppressionSource::SnsEndpointDisabled,
        }
    );
}

#[tokio::test]
async fn a_refused_connection_is_transient_and_not_retried_by_the_sdk() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    // Built from scratch: a loaded configuration would keep taking the emulator's endpoint
    // from the environment.
    use aws_sdk_sesv2::config::{Credentials, Region, SharedCredentialsProvider};
    let base = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::for_tests()))
        .endpoint_url(closed)
        .build();
    let sdk = no_retries(&base, Duration::from_secs(5));
    let started = std::time::Instant::now();
    let got = ses(&sdk, "a@example.com")
        .send(&request(Channel::Email, "to@example.com"))
        .await;
    assert_eq!(
        got,
        Outcome::Transient {
            error: "ses_connect_failed".into()
        }
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no retry backoff"
    );
}

/// A TLS handshake that fails (the server answers the ClientHello by closing): nothing of the
/// request was written, so transient, not ambiguous — an SES or SNS delivery in flight must not
/// die as `ambiguous` over it.
#[tokio::test]
async fn a_failed_tls_handshake_is_transient() {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut hello = [0u8; 512];
            let _ = conn.read(&mut hello);
            drop(conn);
        }
    });
    use aws_sdk_sesv2::config::{Credentials, Region, SharedCredentialsProvider};
    let base = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::for_tests()))
        .endpoint_url(url)
        .build();
    let sdk = no_retries(&base, Duration::from_secs(5));
    let got = ses(&sdk, "a@example.com")
        .send(&request(Channel::Email, "to@example.com"))
        .await;
    assert_eq!(
        got,
        Outcome::Transient {
            error: "ses_connect_failed".into()
        }
    );
}

/// A connection that dies after the request was written: ambiguous, and exactly one
/// connection — the SDK's own retry would be a silent second send.
#[tokio::test]
async fn a_dropped_connection_is_ambiguous_and_never_retried_by_the_sdk() {
    use std::io::Read;
    use std::sync::atomic::{AtomicU32, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicU32::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            counter.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 8192];
            let _ = conn.read(&mut buf);
            drop(conn);
        }
    });
    use aws_sdk_sesv2::config::{Credentials, Region, SharedCredentialsProvider};
    let base = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::for_tests()))
        .endpoint_url(url)
        .build();
    let sdk = no_retries(&base, Duration::from_secs(5));
    let got = ses(&sdk, "a@example.com")
        .send(&request(Channel::Email, "to@example.com"))
        .await;
    assert!(matches!(got, Outcome::Ambiguous { .. }), "{got:?}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection: no SDK retry"
    );
}

/// The consumer with SES for email and SNS for SMS and push, chosen by configuration alone.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn the_consumer_delivers_through_ses_and_sns_chosen_by_configuration() {
    let sdk = sdk().await;
    let from = verified_sender(&sdk).await;
    let app = platform_app(&sdk).await;
    let now = Timestamp::from_millis(1_800_000_000_000);
    let w = crate::world::World::from_env(
        &[
            ("EMAIL_PROVIDER", "ses"),
            ("EMAIL_SES_FROM", from.as_str()),
            ("SMS_PROVIDER", "sns"),
            ("PUSH_PROVIDER", "sns"),
            ("PUSH_SNS_PLATFORM_APPLICATION_ARN", app.as_str()),
        ],
        now,
        &sdk,
    );
    let r = Reminder::new(
        NewReminder {
            reminder_id: ReminderId::parse("all-channels").unwrap(),
            subscriber_id: SubscriberId::parse("s").unwrap(),
            due_at: now,
            fresh_until: None,
            content: Content::Text {
                subject: "Hi".into(),
                body: "there".into(),
            },
            recipients: vec![
                Recipient::parse(Channel::Email, "p@example.com").unwrap(),
                Recipient::parse(Channel::Sms, "+14155550123").unwrap(),
                Recipient::parse(Channel::Push, &unique("tok")).unwrap(),
            ],
        },
        Duration::from_secs(3600),
        Duration::from_secs(3600),
    )
    .unwrap();
    for channel in Channel::ALL {
        let msg = w.enqueue(&r, channel).await;
        let out = w.poll(channel).await.expect("a batch");
        assert_eq!(
            out.metrics.get(channel).delivered,
            1,
            "{channel}: {:?}",
            out.records
        );
        let rec = w.record(&msg.delivery_key).await;
        assert!(rec.provider_receipt().is_some(), "{channel}");
    }
}
