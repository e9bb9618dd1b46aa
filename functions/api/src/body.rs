//! The body of `PUT /v1/reminders/{id}`, decoded into the library's `NewReminder` and then
//! held to the library's own rules (`Reminder::new`, `check_due_ahead`, `Recipient::parse`,
//! `check_content`): the same rules the scheduler's decoder applies to stored items, with the
//! same redaction of serde's messages, so no value an application sent is ever quoted back.
//! Only the field a refusal names is the body's (`not_before`, `fresh_for_secs`).

use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::domain::{
    check_due_ahead, Channel, Content, NewReminder, Recipient, Reminder, ReminderError, ReminderId,
    SmsCountries, SubscriberId,
};
use serde::Deserialize;
use serde_json::Value;

use crate::error::{api_field, ApiError};
use crate::Defaults;

/// The largest body read: well above any valid reminder (subject 998 bytes, body or template
/// data 64 KiB each, escaped), far below API Gateway's 10 MB.
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;

/// Times before this are refused: they are epoch seconds sent as milliseconds (1970).
const EARLIEST_MILLIS: i64 = 946_684_800_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PutBody {
    subscriber_id: String,
    due_at: Value,
    #[serde(default)]
    fresh_for_secs: Option<u64>,
    #[serde(default)]
    fresh_until: Option<Value>,
    #[serde(default)]
    not_before: Option<Value>,
    channels: Channels,
    content: ContentBody,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Channels {
    push: Option<String>,
    email: Option<String>,
    sms: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContentBody {
    subject: Option<String>,
    body: Option<String>,
    template_id: Option<String>,
    data: Option<Value>,
}

/// What a body asks for.
pub struct Wanted {
    /// Validated: exactly what `reminder_writes::create` stores.
    pub reminder: Reminder,
    /// The body named its freshness (`fresh_for_secs` or `fresh_until`); without it, a
    /// repeated body is the same whatever the default is now.
    pub freshness_given: bool,
    /// The freshness field the body gave (`fresh_for_secs` or `fresh_until`), if any.
    pub freshness_field: Option<&'static str>,
    /// The field the stored due time came from: `due_at`, or `not_before` when that is later.
    pub due_field: &'static str,
}

/// The reminder a body asks for, validated by the library's rules.
pub fn decode(
    id: &str,
    raw: &[u8],
    defaults: &Defaults,
    now: Timestamp,
) -> Result<Wanted, ApiError> {
    if raw.len() > MAX_REQUEST_BYTES {
        return Err(ApiError::too_large(
            None,
            format!("the body is over {MAX_REQUEST_BYTES} bytes"),
        ));
    }
    let reminder_id = ReminderId::parse(id).map_err(|e| ApiError::invalid("id", e.to_string()))?;
    let de = &mut serde_json::Deserializer::from_slice(raw);
    let body: PutBody = serde_path_to_error::deserialize(de).map_err(refused)?;
    let subscriber_id = SubscriberId::parse(body.subscriber_id.as_str())
        .map_err(|e| ApiError::invalid("subscriber_id", e.to_string()))?;
    // The stored due time: the later of due_at and not_before. Freshness counts from it.
    let mut due_at = when("due_at", &body.due_at)?;
    let mut due_field = "due_at";
    if let Some(v) = &body.not_before {
        let not_before = when("not_before", v)?;
        if not_before > due_at {
            (due_at, due_field) = (not_before, "not_before");
        }
    }
    // The library's limits, its own checks: only the field is the body's.
    check_due_ahead(due_at, now).map_err(|e| in_body(due_field, &e))?;
    let fresh_until = freshness(&body, due_at)?;
    let fresh_field = match body.fresh_for_secs {
        Some(_) => "fresh_for_secs",
        None => "fresh_until",
    };
    let new = NewReminder {
        reminder_id,
        subscriber_id,
        due_at,
        fresh_until,
        content: content(body.content)?,
        recipients: recipients(body.channels, &defaults.sms_countries)?,
    };
    let reminder =
        Reminder::new(new, defaults.freshness, defaults.retention.0).map_err(|e| match e {
            ReminderError::FreshTooLong => in_body(fresh_field, &e),
            // Moved later by not_before: that is what the caller can change.
            ReminderError::FreshBeforeDue if due_field == "not_before" => ApiError::invalid(
                "not_before",
                "not_before: must be before fresh_until (it could never be sent)",
            ),
            // Too short a window, given as fresh_for_secs: name the field the caller gave.
            ReminderError::FreshBeforeDue => in_body(fresh_field, &e),
            e => ApiError::from(e),
        })?;
    Ok(Wanted {
        reminder,
        freshness_given: fresh_until.is_some(),
        freshness_field: fresh_until.is_some().then_some(fresh_field),
        due_field,
    })
}

/// The library's refusal `e`, naming the body's `field` (the stored item's name for it may
/// differ: the stored due time may be the body's `not_before`).
fn in_body(field: &str, e: &ReminderError) -> ApiError {
    ApiError::invalid(field, format!("{field}: {}", e.requirement()))
}

/// A body that does not decode, refused naming the field at fault; a body that is not JSON
/// at all (cut short, a stray comma) names `body`, with where the JSON broke.
pub(crate) fn refused(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    if matches!(
        e.inner().classify(),
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof
    ) {
        let inner = e.into_inner();
        let (line, column) = (inner.line(), inner.column());
        return ApiError::invalid(
            "body",
            format!("body: not valid JSON (line {line}, column {column})"),
        );
    }
    let mut segments: Vec<String> = e.path().iter().map(|s| s.to_string()).collect();
    let message = reminders::domain::reminder::redact(&e.into_inner().to_string());
    // An unknown key is the caller's text (a client could key channels by address): name
    // the object it is in, never the key.
    if message.starts_with("unknown field") {
        segments.pop();
    }
    let field = field_of(&segments.join("."), &message);
    ApiError::invalid(field.clone(), format!("{field}: {message}"))
}

/// The field a decoding error is about: its path, or for a missing field the field itself
/// (`missing field `due_at`` at the top is `due_at`, inside `content` it is `content.…`).
fn field_of(path: &str, message: &str) -> String {
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    match (path, missing) {
        ("" | ".", Some(name)) => name.to_owned(),
        ("" | ".", None) => "body".to_owned(),
        (path, Some(name)) => format!("{path}.{name}"),
        (path, None) => path.to_owned(),
    }
}

/// `fresh_until`, from `fresh_for_secs` (counted from `due_at`) or given; `None` leaves the
/// default freshness to `Reminder::new`.
fn freshness(body: &PutBody, due_at: Timestamp) -> Result<Option<Timestamp>, ApiError> {
    match (body.fresh_for_secs, &body.fresh_until) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "fresh_for_secs",
            "fresh_for_secs: give fresh_for_secs or fresh_until, not both",
        )),
        (Some(0 | 1), None) => Err(ApiError::invalid(
            "fresh_for_secs",
            "fresh_for_secs: must be at least 2 (more than the one-second clock margin)",
        )),
        (Some(secs), None) => Ok(Some(due_at.plus(Duration::from_secs(secs)))),
        (None, Some(v)) => when("fresh_until", v).map(Some),
        (None, None) => Ok(None),
    }
}

/// An RFC 3339 time or whole epoch milliseconds.
pub(crate) fn when(field: &str, v: &Value) -> Result<Timestamp, ApiError> {
    let t = match v {
        Value::String(s) => Timestamp::parse_rfc3339(s),
        Value::Number(n) => n.as_i64().map(Timestamp::from_millis),
        _ => None,
    };
    let bad = |rule: &str| ApiError::invalid(field, format!("{field}: {rule}"));
    match t {
        None => Err(bad(
            "must be an RFC 3339 time (2026-12-24T17:00:00Z) or whole epoch milliseconds",
        )),
        Some(t) if t.as_millis() < EARLIEST_MILLIS => Err(bad(
            "must be in epoch milliseconds (this is before 2000: seconds sent as milliseconds?)",
        )),
        Some(t) => Ok(t),
    }
}

pub(crate) fn recipients(c: Channels, sms: &SmsCountries) -> Result<Vec<Recipient>, ApiError> {
    let listed = [
        (Channel::Push, c.push),
        (Channel::Email, c.email),
        (Channel::Sms, c.sms),
    ];
    let mut out = Vec::new();
    for (channel, raw) in listed {
        let Some(raw) = raw else { continue };
        let r = Recipient::parse(channel, &raw).map_err(|e| {
            let field = api_field(&format!("recipients.{channel}"));
            ApiError::invalid(field.clone(), format!("{field}: {e}"))
        })?;
        if channel == Channel::Sms && !sms.allows(r.expose()) {
            return Err(ApiError::invalid(
                "channels.sms",
                format!(
                    "channels.sms: this stack sends SMS only to {} (SMS_ALLOWED_COUNTRY_CODES)",
                    sms.describe()
                ),
            ));
        }
        out.push(r);
    }
    Ok(out)
}

pub(crate) fn content(c: ContentBody) -> Result<Content, ApiError> {
    match c {
        ContentBody {
            subject: Some(subject),
            body: Some(body),
            template_id: None,
            data: None,
        } => Ok(Content::Text { subject, body }),
        ContentBody {
            subject: None,
            body: None,
            template_id: Some(template_id),
            data: Some(data),
        } => {
            if !data.is_object() {
                return Err(ApiError::invalid(
                    "content.data",
                    "content.data: must be a JSON object",
                ));
            }
            if template_id.is_empty() {
                return Err(ApiError::invalid(
                    "content.template_id",
                    "content.template_id: must not be empty",
                ));
            }
            Ok(Content::Template {
                template_id,
                template_data: data.to_string(),
            })
        }
        _ => Err(ApiError::invalid(
            "content",
            "content: must hold subject and body, or template_id and data (an object)",
        )),
    }
}
