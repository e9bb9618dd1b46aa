//! `remindctl local receive`: a provider on localhost that speaks the generic HTTP provider
//! contract (docs/configuration.md, "Generic HTTP provider contract") and prints one line per
//! request, so the local walk-through needs nothing else. It deduplicates on `Idempotency-Key` as a
//! real provider must: a repeated key is answered with the first receipt and printed as a
//! duplicate.

use std::collections::HashMap;
use std::io::Write;

use reminders::domain::{Channel, Recipient};
use serde_json::{json, Value};
use tiny_http::{Header, Method, Request, Response, Server};

/// A provider on localhost for `EMAIL_PROVIDER=http` (or push, SMS): answers the generic
/// HTTP provider contract with 200 and a receipt, and prints each delivery (recipients masked,
/// y***@example.org), until Ctrl-C. It speaks plain http on loopback, which a provider accepts only with
/// REMINDERS_ALLOW_LOOPBACK_HTTP=1 (`local up` exports it).
///
/// Example: remindctl local receive --port 8080 &
#[derive(Debug, clap::Args)]
pub struct ReceiveArgs {
    /// Port on 127.0.0.1.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// An address that is dead (repeatable): requests to it are answered `410 Gone`, as a
    /// provider declares an address dead, so the pipeline suppresses it.
    #[arg(long, value_name = "ADDRESS")]
    gone: Vec<String>,
}

/// Serve until the process is stopped (Ctrl-C).
pub fn run(args: ReceiveArgs) -> Result<(), String> {
    let port = args.port;
    let server = Server::http(("127.0.0.1", port)).map_err(|e| format!("--port {port}: {e}"))?;
    println!("receiving deliveries on http://127.0.0.1:{port}/ (any path); Ctrl-C stops");
    let mut receipts: HashMap<String, String> = HashMap::new();
    for mut request in server.incoming_requests() {
        let body = read_body(&mut request);
        let parts = Parts {
            body,
            ..request_parts(&request)
        };
        let (status, body, line) = answer(parts, &mut receipts, &args.gone);
        println!("{line}");
        let _ = std::io::stdout().flush();
        respond(request, status, body);
    }
    Ok(())
}

struct Parts {
    method: Method,
    key: Option<String>,
    body: Value,
}

fn request_parts(request: &Request) -> Parts {
    let key = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Idempotency-Key"))
        .map(|h| h.value.as_str().to_owned());
    Parts {
        method: request.method().clone(),
        key,
        body: Value::Null,
    }
}

/// The status, the JSON answer and the line to print for one request.
fn answer(
    parts: Parts,
    receipts: &mut HashMap<String, String>,
    gone: &[String],
) -> (u16, Value, String) {
    if parts.method != Method::Post {
        return (
            405,
            json!({"error": "POST only"}),
            "refused: not a POST".into(),
        );
    }
    let Some(key) = parts.key else {
        let line = "refused: no Idempotency-Key header".to_owned();
        return (400, json!({"error": "Idempotency-Key required"}), line);
    };
    if !parts.body.is_object() {
        let line = format!("refused {key}: the body is not a JSON object");
        return (400, json!({"error": "a JSON object body required"}), line);
    }
    let b = &parts.body;
    let text = |f: &str| b[f].as_str().unwrap_or_default().to_owned();
    let channel = text("channel");
    // Recipients never appear in clear, here as in the pipeline's logs.
    let to = channel
        .parse::<Channel>()
        .ok()
        .and_then(|c| Recipient::parse(c, &text("recipient")).ok())
        .map_or_else(|| "an unreadable recipient".to_owned(), |r| r.masked());
    if gone.contains(&text("recipient")) {
        let line = format!("gone {channel} {key} to {to}: 410, the address is dead");
        return (410, json!({"error": "the address is gone"}), line);
    }
    let next = format!("local-{}", receipts.len() + 1);
    let (id, fresh) = match receipts.get(&key) {
        Some(id) => (id.clone(), false),
        None => {
            receipts.insert(key.clone(), next.clone());
            (next, true)
        }
    };
    let what = match text("template_id").as_str() {
        "" => format!("subject {:?} body {:?}", text("subject"), text("body")),
        template => format!("template {template:?} data {}", b["template_data"]),
    };
    let verb = if fresh {
        "delivered"
    } else {
        "duplicate (same key)"
    };
    let line = format!("{verb} {channel} {key} to {to}: {what} [receipt {id}]");
    (200, json!({"id": id}), line)
}

fn respond(request: Request, status: u16, body: Value) {
    let json = Header::from_bytes("Content-Type", "application/json").expect("a valid header");
    let response = Response::from_string(body.to_string())
        .with_status_code(status)
        .with_header(json);
    let _ = request.respond(response);
}

/// Read the request's body as JSON (`Null` when it is not).
fn read_body(request: &mut Request) -> Value {
    let mut text = String::new();
    let _ = request.as_reader().read_to_string(&mut text);
    serde_json::from_str(&text).unwrap_or(Value::Null)
}
