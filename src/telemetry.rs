//! Structured logs: one JSON object per line on stdout, which CloudWatch Logs indexes.
//! `RUST_LOG` filters (default `info`). Recipients never reach a log line: domain types that
//! hold them print a fingerprint instead.

use tracing_subscriber::EnvFilter;

/// Install the JSON subscriber once, at cold start. A second call is a no-op.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init();
}

/// For `remindctl`: transition logs on stderr, as text, only when `RUST_LOG` asks for them
/// (stdout stays the command's answer).
pub fn init_cli() {
    let Ok(filter) = EnvFilter::try_from_default_env() else {
        return;
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_env_filter(filter)
        .try_init();
}
