//! SES feedback in the shapes SES sends it (the event publishing format of a configuration
//! set's EventBridge and SNS destinations, and the identity notifications format).

use super::*;
use crate::ports::MemoryReminderStore;
use serde_json::json;

/// A configuration set's bounce event, as SES publishes it (abridged to the fields read).
fn bounce(kind: &str, to: &[&str]) -> Value {
    json!({
        "eventType": "Bounce",
        "bounce": {
            "feedbackId": "0100018e-feedback",
            "bounceType": kind,
            "bounceSubType": "General",
            "bouncedRecipients": to.iter().map(|a| json!({
                "emailAddress": a, "action": "failed", "status": "5.1.1",
                "diagnosticCode": "smtp; 550 5.1.1 user unknown"})).collect::<Vec<_>>(),
            "timestamp": "2026-12-04T10:00:00.000Z",
            "reportingMTA": "dsn; a1-23.smtp-out.amazonses.com"
        },
        "mail": {
            "timestamp": "2026-12-04T09:59:59.000Z",
            "source": "noreply@mail.example.com",
            "messageId": "0100018e-message",
            "destination": to,
            "tags": {"ses:configuration-set": ["reminders-feedback"]}
        }
    })
}

fn complaint(feedback_type: Option<&str>, to: &[&str]) -> Value {
    let mut c = json!({
        "complainedRecipients": to.iter().map(|a| json!({"emailAddress": a})).collect::<Vec<_>>(),
        "timestamp": "2026-12-04T11:00:00.000Z",
        "feedbackId": "0100018e-complaint",
        "userAgent": "Yahoo!-Mail-Feedback/2.0"
    });
    if let Some(t) = feedback_type {
        c["complaintFeedbackType"] = json!(t);
    }
    json!({"eventType": "Complaint", "complaint": c,
           "mail": {"messageId": "0100018e-message", "destination": to}})
}

/// The EventBridge event the configuration set's EventBridge destination puts on the bus.
fn via_eventbridge(detail: Value, detail_type: &str) -> String {
    json!({
        "version": "0", "id": "7f0c3c4e-0000-4000-8000-000000000001",
        "detail-type": detail_type, "source": "aws.ses",
        "account": "123456789012", "time": "2026-12-04T10:00:01Z", "region": "us-east-1",
        "resources": ["arn:aws:ses:us-east-1:123456789012:configuration-set/reminders-feedback"],
        "detail": detail
    })
    .to_string()
}

/// An SNS destination's notification: the SES event as a string in `Message`.
fn via_sns(event: Value) -> String {
    json!({"Type": "Notification", "MessageId": "sns-1",
           "TopicArn": "arn:aws:sns:us-east-1:123456789012:ses-feedback",
           "Message": event.to_string(), "Timestamp": "2026-12-04T10:00:01.000Z"})
    .to_string()
}

fn email(a: &str) -> Recipient {
    Recipient::parse(Channel::Email, a).unwrap()
}

#[test]
fn a_permanent_bounce_suppresses_each_bounced_address_in_every_envelope() {
    let to = ["gone@example.org", "Old Name <old@example.net>"];
    let want = Feedback::Suppress {
        source: SuppressionSource::SesBounce,
        addresses: vec![email("gone@example.org"), email("old@example.net")],
    };
    let event = bounce("Permanent", &to);
    for body in [
        via_eventbridge(event.clone(), "Email Bounced"),
        via_sns(event.clone()),
        event.to_string(),
    ] {
        assert_eq!(parse(&body), Ok(want.clone()), "{body}");
    }
    // The identity notifications format names the kind `notificationType`.
    let mut identity = event;
    identity["notificationType"] = identity["eventType"].take();
    identity.as_object_mut().unwrap().remove("eventType");
    assert_eq!(parse(&identity.to_string()), Ok(want));
}

/// One recipient SES names that does not read as an address never blocks the others.
#[test]
fn an_unreadable_recipient_is_skipped_and_the_others_suppressed() {
    let event = bounce("Permanent", &["not an address", "gone@example.org"]);
    assert_eq!(
        parse(&event.to_string()),
        Ok(Feedback::Suppress {
            source: SuppressionSource::SesBounce,
            addresses: vec![email("gone@example.org")],
        })
    );
}

#[test]
fn transient_bounces_not_spam_and_other_events_change_nothing() {
    let t = bounce("Transient", &["full@example.org"]);
    assert_eq!(
        parse(&via_eventbridge(t, "Email Bounced")),
        Ok(Feedback::Ignore("transient bounce"))
    );
    let u = bounce("Undetermined", &["x@example.org"]);
    assert!(matches!(parse(&u.to_string()), Ok(Feedback::Ignore(_))));
    let not_spam = complaint(Some("not-spam"), &["x@example.org"]);
    assert_eq!(
        parse(&via_sns(not_spam)),
        Ok(Feedback::Ignore("not-spam feedback"))
    );
    let delivery = json!({"eventType": "Delivery", "mail": {}, "delivery": {}});
    assert_eq!(
        parse(&via_eventbridge(delivery, "Email Delivered")),
        Ok(Feedback::Ignore("not a bounce or complaint"))
    );
}

#[test]
fn a_complaint_suppresses_with_its_own_source() {
    for kind in [None, Some("abuse")] {
        let body = via_eventbridge(
            complaint(kind, &["angry@example.org"]),
            "Email Complaint Received",
        );
        assert_eq!(
            parse(&body),
            Ok(Feedback::Suppress {
                source: SuppressionSource::SesComplaint,
                addresses: vec![email("angry@example.org")],
            })
        );
    }
}

#[test]
fn what_is_not_feedback_is_malformed_with_a_reason_that_quotes_nothing() {
    let cases = [
        ("not json", FeedbackError::NotJson),
        ("{\"hello\": 1}", FeedbackError::NoEvent),
        (
            r#"{"source": "aws.ses", "detail": "x"}"#,
            FeedbackError::Field("detail: must be the SES event"),
        ),
        (
            r#"{"eventType": "Bounce"}"#,
            FeedbackError::Field("bounce: missing"),
        ),
        (
            r#"{"eventType": "Bounce", "bounce": {"bounceType": "Permanent", "bouncedRecipients": []}}"#,
            FeedbackError::Field("bounce.bouncedRecipients: must list the addresses"),
        ),
        (
            r#"{"eventType": "Bounce", "bounce": {"bounceType": "Permanent", "bouncedRecipients": [{"emailAddress": "secret-not-an-address"}]}}"#,
            FeedbackError::Field("emailAddress: not an email address"),
        ),
        (
            r#"{"eventType": 7}"#,
            FeedbackError::Field("eventType: must be a string"),
        ),
    ];
    for (body, want) in cases {
        let got = parse(body).unwrap_err();
        assert_eq!(got, want, "{body}");
        assert!(!got.to_string().contains("secret"), "{got}");
    }
}

fn record(id: &str, body: &str) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(id.to_owned());
    m.body = Some(body.to_owned());
    m
}

#[tokio::test]
async fn a_batch_suppresses_ignores_and_sets_aside_the_malformed() {
    let store = MemoryReminderStore::new(4);
    let key = SuppressionKey::new(b"feedback tests' suppression key".to_vec()).unwrap();
    let now = Timestamp::from_millis(1_796_385_600_000);
    let records = [
        record(
            "m-1",
            &via_eventbridge(bounce("Permanent", &["Gone@Example.org"]), "Email Bounced"),
        ),
        record(
            "m-2",
            &via_eventbridge(bounce("Transient", &["full@example.org"]), "Email Bounced"),
        ),
        record("m-3", "garbage"),
        record("m-4", &via_sns(complaint(None, &["angry@example.org"]))),
    ];
    let out = handle(&store, &key, &records, now).await;
    assert_eq!((out.suppressed, out.ignored), (2, 1));
    assert!(out.response.batch_item_failures.is_empty());
    assert_eq!(out.malformed.len(), 1);
    assert_eq!(out.malformed[0].0, "m-3");
    assert_eq!(out.malformed[0].2, "malformed_feedback: not JSON");
    // Found as the consumer looks it up: by the keyed hash of the (lowercased) address.
    let gone = crate::domain::AddressHash::of(&key, &email("gone@example.org"));
    let sup = store.suppression(&gone).await.unwrap().expect("suppressed");
    assert_eq!(sup.source, SuppressionSource::SesBounce);
    assert_eq!(sup.masked, "g***@example.org");
    let angry = crate::domain::AddressHash::of(&key, &email("angry@example.org"));
    let sup = store
        .suppression(&angry)
        .await
        .unwrap()
        .expect("suppressed");
    assert_eq!(sup.source, SuppressionSource::SesComplaint);
    let full = crate::domain::AddressHash::of(&key, &email("full@example.org"));
    assert_eq!(store.suppression(&full).await.unwrap(), None);
}
