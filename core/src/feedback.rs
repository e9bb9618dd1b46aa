//! SES feedback: bounces and complaints SES learns of after `SendEmail` answered (a mailbox that
//! stopped existing, a recipient who pressed "spam") come back as SES events, through the
//! configuration set's EventBridge destination, a rule, and the feedback queue. Each permanent
//! bounce and each complaint suppresses the address (docs/design.md, "Suppressions"), so the next
//! reminder to it ends `suppressed` (or falls back) without a send: SES pauses an account whose
//! bounce or complaint rate stays high, and every team's email with it.
//!
//! A body is read in each shape SES feedback arrives in: an EventBridge event (`detail` is the
//! SES event), an SNS notification (`Message` holds it, as a string), or the SES event itself
//! (`eventType`, or `notificationType` for identity notifications). Transient and undetermined
//! bounces, `not-spam` feedback, and other event types change nothing. A body that is none of
//! these is malformed: the function dead-letters it with its reason, and it blocks nothing.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsMessage};
use serde_json::Value;

use crate::clock::Timestamp;
use crate::domain::{Channel, Recipient, Suppression, SuppressionKey, SuppressionSource};
use crate::ports::{PortError, ReminderStore};

/// The feedback queue's DLQ, where a body that is not SES feedback goes with its reason.
pub const FEEDBACK_DLQ_VAR: &str = "FEEDBACK_DLQ_URL";

/// What one feedback body asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Feedback {
    /// Suppress these addresses, for this reason.
    Suppress {
        source: SuppressionSource,
        addresses: Vec<Recipient>,
    },
    /// Nothing to do, and why (a transient bounce, a delivery event, …).
    Ignore(&'static str),
}

/// Why a body is not SES feedback. Never quotes the body (it holds addresses).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeedbackError {
    #[error("malformed_feedback: not JSON")]
    NotJson,
    #[error(
        "malformed_feedback: no SES event (no detail, Message, eventType or notificationType)"
    )]
    NoEvent,
    #[error("malformed_feedback: {0}")]
    Field(&'static str),
}

/// The SES event a body carries, in any of its envelopes.
fn event(body: &str) -> Result<Value, FeedbackError> {
    let outer: Value = serde_json::from_str(body).map_err(|_| FeedbackError::NotJson)?;
    if outer.get("eventType").is_some() || outer.get("notificationType").is_some() {
        return Ok(outer);
    }
    if outer.get("source").and_then(Value::as_str) == Some("aws.ses") {
        return outer
            .get("detail")
            .cloned()
            .filter(Value::is_object)
            .ok_or(FeedbackError::Field("detail: must be the SES event"));
    }
    if let Some(message) = outer.get("Message").and_then(Value::as_str) {
        return event(message);
    }
    Err(FeedbackError::NoEvent)
}

/// One address as SES reports it (`a@b`, or `Name <a@b>`), as an email recipient.
fn address(raw: &str) -> Result<Recipient, FeedbackError> {
    let bare = match (raw.rfind('<'), raw.rfind('>')) {
        (Some(open), Some(close)) if open < close => &raw[open + 1..close],
        _ => raw,
    };
    // Lowercased, as the suppression's hash takes it, so its masked form reads the same.
    Recipient::parse(Channel::Email, &bare.trim().to_ascii_lowercase())
        .map_err(|_| FeedbackError::Field("emailAddress: not an email address"))
}

/// The addresses of one event: each one SES names that reads as an address (one it cannot
/// read is skipped and logged, never blocking the others); an error only when none does.
fn addresses(list: Option<&Value>, field: &'static str) -> Result<Vec<Recipient>, FeedbackError> {
    let list = list
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .ok_or(FeedbackError::Field(field))?;
    let mut found = Vec::new();
    let mut first_error = None;
    for r in list {
        let one = r
            .get("emailAddress")
            .and_then(Value::as_str)
            .ok_or(FeedbackError::Field("emailAddress: missing"))
            .and_then(address);
        match one {
            Ok(a) => found.push(a),
            Err(e) => {
                tracing::warn!(reason = %e, "feedback: a recipient SES named is skipped");
                first_error.get_or_insert(e);
            }
        }
    }
    match (found.is_empty(), first_error) {
        (true, Some(e)) => Err(e),
        _ => Ok(found),
    }
}

/// What `body` asks for.
pub fn parse(body: &str) -> Result<Feedback, FeedbackError> {
    let e = event(body)?;
    let kind = e
        .get("eventType")
        .or_else(|| e.get("notificationType"))
        .and_then(Value::as_str)
        .ok_or(FeedbackError::Field("eventType: must be a string"))?;
    match kind {
        "Bounce" => {
            let bounce = e
                .get("bounce")
                .ok_or(FeedbackError::Field("bounce: missing"))?;
            match bounce.get("bounceType").and_then(Value::as_str) {
                Some("Permanent") => Ok(Feedback::Suppress {
                    source: SuppressionSource::SesBounce,
                    addresses: addresses(
                        bounce.get("bouncedRecipients"),
                        "bounce.bouncedRecipients: must list the addresses",
                    )?,
                }),
                Some("Transient") => Ok(Feedback::Ignore("transient bounce")),
                Some("Undetermined") => Ok(Feedback::Ignore("undetermined bounce")),
                _ => Err(FeedbackError::Field("bounce.bounceType: unknown")),
            }
        }
        "Complaint" => {
            let complaint = e
                .get("complaint")
                .ok_or(FeedbackError::Field("complaint: missing"))?;
            // A recipient's report that the mail is not spam is no reason to stop.
            if complaint
                .get("complaintFeedbackType")
                .and_then(Value::as_str)
                == Some("not-spam")
            {
                return Ok(Feedback::Ignore("not-spam feedback"));
            }
            Ok(Feedback::Suppress {
                source: SuppressionSource::SesComplaint,
                addresses: addresses(
                    complaint.get("complainedRecipients"),
                    "complaint.complainedRecipients: must list the addresses",
                )?,
            })
        }
        _ => Ok(Feedback::Ignore("not a bounce or complaint")),
    }
}

/// A batch's result: the partial batch response, counted, and the bodies to dead-letter.
#[derive(Debug, Default)]
pub struct Handled {
    pub response: SqsBatchResponse,
    pub suppressed: usize,
    pub ignored: usize,
    /// Messages that are not SES feedback: `(message id, body, reason)`, for the function
    /// to dead-letter with their reason (a failure to do so fails the record instead).
    pub malformed: Vec<(String, String, String)>,
}

/// Suppresses what each record asks, under `key`. A record whose write failed is named in
/// the partial batch response (SQS delivers it again; a suppression written twice is one).
pub async fn handle<S: ReminderStore>(
    store: &S,
    key: &SuppressionKey,
    records: &[SqsMessage],
    now: Timestamp,
) -> Handled {
    let mut out = Handled::default();
    for record in records {
        let id = record.message_id.clone().unwrap_or_default();
        let body = record.body.as_deref().unwrap_or_default();
        match parse(body) {
            Err(e) => {
                tracing::warn!(message_id = %id, reason = %e, "not SES feedback: dead-lettered");
                out.malformed.push((id, body.to_owned(), e.to_string()));
            }
            Ok(Feedback::Ignore(why)) => {
                tracing::info!(message_id = %id, why, "feedback: nothing to suppress");
                out.ignored += 1;
            }
            Ok(Feedback::Suppress { source, addresses }) => {
                match suppress(store, key, &addresses, source, now).await {
                    Ok(n) => out.suppressed += n,
                    Err(e) => {
                        tracing::error!(message_id = %id, error = %e, "feedback: suppression not written, retried");
                        out.response.batch_item_failures.push(failure(&id));
                    }
                }
            }
        }
    }
    out
}

async fn suppress<S: ReminderStore>(
    store: &S,
    key: &SuppressionKey,
    addresses: &[Recipient],
    source: SuppressionSource,
    now: Timestamp,
) -> Result<usize, PortError> {
    for recipient in addresses {
        let sup = Suppression::record(key, recipient, source, now);
        store.put_suppression(&sup).await?;
        tracing::warn!(
            channel = %sup.channel,
            address = %sup.masked,
            address_hash = %sup.address_hash,
            source = %sup.source,
            "address suppressed from SES feedback"
        );
    }
    Ok(addresses.len())
}

pub fn failure(message_id: &str) -> BatchItemFailure {
    let mut f = BatchItemFailure::default();
    f.item_identifier = message_id.to_owned();
    f
}

#[cfg(test)]
#[path = "feedback_tests.rs"]
mod tests;
