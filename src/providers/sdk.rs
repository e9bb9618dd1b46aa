//! Shared pieces of the AWS SDK providers: clients with the SDK's retries off and an
//! operation timeout (docs/design.md, "The ambiguous rule": a retry inside the SDK after a timeout
//! is a silent second send), and the classification of errors that are not a provider's answer.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::Response as HttpResponse;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::policy::Outcome;

/// Retries off; the whole call bounded by `timeout`; connecting bounded separately so a
/// connect timeout (before anything was written) is told apart from a timeout after.
pub fn no_retries(sdk: &aws_config::SdkConfig, timeout: Duration) -> aws_config::SdkConfig {
    sdk.to_builder()
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(timeout)
                // Below the operation timeout, so a slow connect is seen as a connect failure.
                .connect_timeout((timeout / 2).min(Duration::from_secs(3)))
                .build(),
        )
        .build()
}

/// Unmodeled error codes AWS services use for throttling.
const THROTTLING_CODES: [&str; 6] = [
    "Throttled",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
];

/// Classify an SDK error; `service` classifies the operation's modeled errors and returns
/// `None` for those it leaves to the generic rules (unmodeled codes, HTTP status).
pub fn classify<E>(
    prefix: &str,
    err: &SdkError<E, HttpResponse>,
    service: impl FnOnce(&E) -> Option<Outcome>,
) -> Outcome
where
    E: ProvideErrorMetadata + std::error::Error,
{
    match err {
        SdkError::ServiceError(ctx) => {
            if let Some(outcome) = service(ctx.err()) {
                return outcome;
            }
            // The service's error code is its typed identity for unmodeled errors.
            let code = ctx.err().code().unwrap_or("unknown");
            if THROTTLING_CODES.contains(&code) || ctx.raw().status().as_u16() == 429 {
                return Outcome::Throttled { retry_after: None };
            }
            if ctx.raw().status().is_server_error() {
                return Outcome::Transient {
                    error: format!("{prefix}_{}", ctx.raw().status().as_u16()),
                };
            }
            Outcome::Permanent {
                error: format!("{prefix}_{}", short(code)),
            }
        }
        // The operation timed out: the request may have been acted on.
        SdkError::TimeoutError(_) => Outcome::Ambiguous {
            error: format!("{prefix}_timeout"),
        },
        SdkError::DispatchFailure(d) => {
            // Only connect is bounded below the operation timeout (no read timeout is set),
            // so a connector timeout happened before the request was written; so did a
            // refusal, a DNS failure and a failed TLS handshake.
            let before_write = d.is_timeout()
                || d.as_connector_error()
                    .and_then(|c| std::error::Error::source(c))
                    .is_some_and(failed_to_connect);
            if before_write || d.is_user() {
                Outcome::Transient {
                    error: format!("{prefix}_connect_failed"),
                }
            } else {
                Outcome::Ambiguous {
                    error: format!("{prefix}_connection_lost"),
                }
            }
        }
        SdkError::ResponseError(_) => Outcome::Ambiguous {
            error: format!("{prefix}_unreadable_response"),
        },
        SdkError::ConstructionFailure(_) => Outcome::Permanent {
            error: format!("{prefix}_bad_request"),
        },
        _ => Outcome::Ambiguous {
            error: format!("{prefix}_unknown_failure"),
        },
    }
}

/// Whether the connection was never established — refused, unresolvable, or its TLS
/// handshake failed — so no byte of the request was written.
fn failed_to_connect(mut e: &(dyn std::error::Error + 'static)) -> bool {
    use aws_smithy_runtime_api::client::dns::ResolveDnsError;
    loop {
        if e.downcast_ref::<ResolveDnsError>().is_some() {
            return true;
        }
        // hyper's client says whether an error came from establishing the connection (TCP
        // connect, DNS, the TLS handshake) rather than from using it.
        if let Some(h) = e.downcast_ref::<hyper_util::client::legacy::Error>() {
            if h.is_connect() {
                return true;
            }
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::AddrNotAvailable
                    | std::io::ErrorKind::NotFound
            ) {
                return true;
            }
        }
        match e.source() {
            Some(next) => e = next,
            None => return false,
        }
    }
}

/// A short, safe error class for the ledger and the DLQ evidence.
pub fn short(code: &str) -> String {
    code.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(60)
        .collect()
}

#[cfg(test)]
mod tests {
    use aws_sdk_sns::operation::publish::PublishError;
    use aws_smithy_runtime_api::client::result::SdkError;
    use aws_smithy_runtime_api::http::{Response, StatusCode};
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    use super::*;

    fn service_error(status: u16, code: &str) -> SdkError<PublishError, Response> {
        let meta = ErrorMetadata::builder().code(code).build();
        let raw = Response::new(StatusCode::try_from(status).unwrap(), SdkBody::empty());
        SdkError::service_error(PublishError::generic(meta), raw)
    }

    #[test]
    fn a_dns_failure_is_transient_not_ambiguous() {
        use aws_smithy_runtime_api::client::dns::ResolveDnsError;
        use aws_smithy_runtime_api::client::result::ConnectorError;
        let dns = ResolveDnsError::new(std::io::Error::other("no such host"));
        let err: SdkError<PublishError, Response> =
            SdkError::dispatch_failure(ConnectorError::io(Box::new(dns)));
        assert_eq!(
            classify("sns", &err, |_| None),
            Outcome::Transient {
                error: "sns_connect_failed".into()
            }
        );
    }

    #[test]
    fn unmodeled_codes_and_statuses_are_classified() {
        let classify_sns = |e: &SdkError<PublishError, Response>| classify("sns", e, |_| None);
        assert_eq!(
            classify_sns(&service_error(400, "Throttled")),
            Outcome::Throttled { retry_after: None },
            "SNS says Throttled"
        );
        assert_eq!(
            classify_sns(&service_error(429, "SomethingNew")),
            Outcome::Throttled { retry_after: None }
        );
        assert_eq!(
            classify_sns(&service_error(503, "ServiceUnavailable")),
            Outcome::Transient {
                error: "sns_503".into()
            }
        );
        assert_eq!(
            classify_sns(&service_error(400, "OptedOut")),
            Outcome::Permanent {
                error: "sns_OptedOut".into()
            }
        );
    }
}
