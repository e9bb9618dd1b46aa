//! Structured logs: one JSON object per line on stdout, which CloudWatch Logs indexes.
//! `RUST_LOG` filters (default `info`): a level, or `target=level` directives separated by
//! commas (`info,reminders::consumer=debug`). Span and field filters are not supported: that
//! would bring a regex engine into every bootstrap. Recipients never reach a log line: domain
//! types that hold them print their masked form instead (`u***@example.org`).

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::Context;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The EMF metrics' namespace when `METRICS_NAMESPACE` is not set (the consumer's metrics own it).
pub use crate::consumer::metrics::NAMESPACE as METRICS_NAMESPACE;

/// `RUST_LOG` as directives: `None` when unset, `Err` naming the problem when unreadable.
fn rust_log() -> Option<Result<Targets, String>> {
    let raw = std::env::var("RUST_LOG").ok()?;
    Some(
        raw.parse::<Targets>()
            .map_err(|e| format!("RUST_LOG={raw:?} is not a filter ({e})")),
    )
}

/// `RUST_LOG=…,reminders::aws_calls=debug` adds one line per AWS SDK call to stdout,
/// `{"aws_call":"DynamoDB.GetItem"}`: what a function actually asks of AWS (its IAM role must
/// grant each; the Runtime API tests compare them with the `reminders` crate's `wiring::aws_calls`).
pub const AWS_CALLS_TARGET: &str = "reminders::aws_calls";

/// Prints each SDK operation as its span opens (every SDK operation runs in a span carrying
/// `rpc.service` and `rpc.method`).
struct AwsCalls;

#[derive(Default)]
struct Rpc {
    service: Option<String>,
    method: Option<String>,
}

impl tracing::field::Visit for Rpc {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "rpc.service" => self.service = Some(value.to_owned()),
            "rpc.method" => self.method = Some(value.to_owned()),
            _ => {}
        }
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, format!("{value:?}").trim_matches('"'));
    }
}

impl<S: tracing::Subscriber> Layer<S> for AwsCalls {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: Context<'_, S>,
    ) {
        let mut rpc = Rpc::default();
        attrs.record(&mut rpc);
        if let (Some(service), Some(method)) = (rpc.service, rpc.method) {
            println!(
                "{}",
                serde_json::json!({ "aws_call": format!("{service}.{method}") })
            );
        }
    }
}

/// Install the JSON subscriber once, at cold start. A second call is a no-op. An unreadable
/// `RUST_LOG` falls back to `info`, and says so in the first line.
pub fn init() {
    let (filter, problem) = match rust_log() {
        None => (Targets::new().with_default(tracing::Level::INFO), None),
        Some(Ok(t)) => (t, None),
        Some(Err(e)) => (Targets::new().with_default(tracing::Level::INFO), Some(e)),
    };
    let layer = tracing_subscriber::fmt::layer()
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .with_filter(filter.clone());
    let calls = filter
        .would_enable(AWS_CALLS_TARGET, &tracing::Level::DEBUG)
        .then(|| {
            AwsCalls.with_filter(Targets::new().with_target("aws_sdk_", tracing::Level::DEBUG))
        });
    let _ = tracing_subscriber::registry()
        .with(layer)
        .with(calls)
        .try_init();
    if let Some(problem) = problem {
        tracing::warn!("{problem}; logging at info");
    }
}

/// For `remindctl`: transition logs on stderr, as text, only when `RUST_LOG` asks for them
/// (stdout stays the command's answer). An unreadable `RUST_LOG` is one line on stderr.
pub fn init_cli() {
    let filter = match rust_log() {
        None => return,
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            eprintln!("{e}; no logs");
            return;
        }
    };
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_filter(filter);
    let _ = tracing_subscriber::registry().with(layer).try_init();
}
