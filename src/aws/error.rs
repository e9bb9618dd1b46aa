//! SDK errors → [`PortError`]. Each adapter matches its operation's typed error variants
//! (`into_service_error`-style) and says which are throttling and which are refusals; the text
//! kept is for logs only, never compared.

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::ports::PortError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Throttled,
    /// Configuration, permissions, missing resources: retrying will not help.
    Refused,
    Unavailable,
}

pub(crate) fn port_error<E, R>(
    op: &'static str,
    err: SdkError<E, R>,
    classify: impl FnOnce(&E) -> Kind,
) -> PortError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let kind = match &err {
        SdkError::ServiceError(service) => classify(service.err()),
        SdkError::ConstructionFailure(_) => Kind::Refused,
        _ => Kind::Unavailable,
    };
    let message = chain(&err);
    match kind {
        Kind::Throttled => PortError::Throttled { op, message },
        Kind::Refused => PortError::Refused { op, message },
        Kind::Unavailable => PortError::Unavailable { op, message },
    }
}

/// An error and its causes, as `outer: cause: root cause` — no debug dump of the SDK's types
/// (what an operator reads on one line). Repeats of a cause already said are left out.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

pub(crate) fn corrupt(op: &'static str, err: impl std::fmt::Display) -> PortError {
    PortError::Corrupt {
        op,
        message: err.to_string(),
    }
}
