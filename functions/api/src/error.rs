//! The API's error answer: `{"error": {"code", "field"?, "message"}}`, naming the field at
//! fault and never quoting a recipient.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use reminders::domain::ReminderError;
use reminders::ports::PortError;
use reminders::reminder_writes::WriteError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub field: Option<String>,
    pub message: String,
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "invalid",
            field: Some(field.into()),
            message: message.into(),
        }
    }

    pub fn not_found(what: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            field: None,
            message: format!("no {what} with this id"),
        }
    }

    pub fn conflict(field: &str, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::CONFLICT,
            code: "conflict",
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    pub fn too_large(field: Option<String>, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "too_large",
            field,
            message: message.into(),
        }
    }
}

/// A stored item's attribute, in the API body's words: the same rule, named as the caller
/// wrote it (`recipients.sms` is `channels.sms`, `content.template_data` is `content.data`).
pub fn api_field(item_field: &str) -> String {
    if let Some(rest) = item_field.strip_prefix("recipients") {
        return format!("channels{rest}");
    }
    if item_field == "content.template_data" {
        return "content.data".to_owned();
    }
    item_field.to_owned()
}

impl From<ReminderError> for ApiError {
    fn from(e: ReminderError) -> Self {
        let field = api_field(&e.field());
        let message = format!("{field}: {}", e.requirement());
        match e.is_too_large() {
            true => ApiError::too_large(Some(field), message),
            false => ApiError::invalid(field, message),
        }
    }
}

impl From<reminders::listing::ListError> for ApiError {
    fn from(e: reminders::listing::ListError) -> Self {
        match e {
            reminders::listing::ListError::BadCursor => ApiError::invalid("cursor", e.to_string()),
            reminders::listing::ListError::Port(p) => p.into(),
        }
    }
}

impl From<PortError> for ApiError {
    fn from(e: PortError) -> Self {
        tracing::error!(error = %e, "storage failed");
        let (status, code, message) = match e.is_retryable() {
            true => (
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "storage is unavailable or throttled; retry the same request",
            ),
            false => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "storage refused the request or answered an unreadable item; see the function's log",
            ),
        };
        Self {
            status,
            code,
            field: None,
            message: message.to_owned(),
        }
    }
}

impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Invalid(e) => e.into(),
            WriteError::Port(e) => e.into(),
            WriteError::Contended => Self {
                status: StatusCode::SERVICE_UNAVAILABLE,
                code: "unavailable",
                field: None,
                message: "the reminder kept changing under this request; retry the same request"
                    .to_owned(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = serde_json::json!({"code": self.code, "message": self.message});
        if let Some(field) = self.field {
            error["field"] = field.into();
        }
        (self.status, Json(serde_json::json!({ "error": error }))).into_response()
    }
}
