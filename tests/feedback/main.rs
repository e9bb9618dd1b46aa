//! SES feedback (bounces and complaints) under a fault plan around the reminders table: a
//! record whose suppression write fails is the only one named in the partial batch response.
//! (The feedback's formats and rules are tested beside its code, in the core.)

use aws_lambda_events::event::sqs::SqsMessage;
use reminders::clock::Timestamp;
use reminders::domain::SuppressionKey;
use reminders::feedback::handle;
use reminders::ports::reminders::OP_PUT_SUPPRESSION;
use reminders::ports::{FaultPoint, MemoryReminderStore};
use reminders_harness::around::{Around, Faults};
use serde_json::json;

/// A permanent bounce of `to`, as a configuration set's EventBridge destination puts it on
/// the bus (abridged to the fields read).
fn bounce(to: &str) -> String {
    json!({
        "version": "0", "detail-type": "Email Bounced", "source": "aws.ses",
        "detail": {
            "eventType": "Bounce",
            "bounce": {"bounceType": "Permanent", "bouncedRecipients": [{"emailAddress": to}]},
            "mail": {"messageId": "0100018e-message", "destination": [to]}
        }
    })
    .to_string()
}

fn record(id: &str, body: &str) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(id.to_owned());
    m.body = Some(body.to_owned());
    m
}

#[tokio::test]
async fn a_failed_suppression_write_fails_only_its_record() {
    let faults = Faults::default();
    let store = Around::new(MemoryReminderStore::new(4), faults.clone());
    faults.fail(OP_PUT_SUPPRESSION, FaultPoint::Before, 1);
    let key = SuppressionKey::new(b"feedback tests' suppression key".to_vec()).unwrap();
    let body = bounce("gone@example.org");
    let records = [record("m-1", &body), record("m-2", &body)];
    let out = handle(&store, &key, &records, Timestamp::from_millis(0)).await;
    let failed: Vec<&str> = out
        .response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, ["m-1"]);
    assert_eq!(out.suppressed, 1, "the second record wrote it");
    assert_eq!(store.inner.suppressions().len(), 1);
}
