//! SDK errors → [`PortError`]. Each adapter matches its operation's typed error variants
//! (`into_service_error`-style) and says which are throttling and which are refusals; the text
//! kept is for logs only, never compared.

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
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
    let message = DisplayErrorContext(&err).to_string();
    match kind {
        Kind::Throttled => PortError::Throttled { op, message },
        Kind::Refused => PortError::Refused { op, message },
        Kind::Unavailable => PortError::Unavailable { op, message },
    }
}

pub(crate) fn corrupt(op: &'static str, err: impl std::fmt::Display) -> PortError {
    PortError::Corrupt {
        op,
        message: err.to_string(),
    }
}
