//! The generic HTTP provider: a third-party API that honours `Idempotency-Key`.
//!
//! Contract (docs/configuration.md, "Generic HTTP provider contract"): `POST <endpoint>` with JSON
//! `{"delivery_key","channel","recipient", "subject","body","payload_version"}` (plus `template_id`
//! and `template_data` for template content), headers `Idempotency-Key: <delivery key>`,
//! `Content-Type: application/json` and an optional bearer token. 2xx → delivered (receipt from the
//! JSON `id`); 409 → already accepted; 429 → throttled with Retry-After; 408, 5xx and failures to
//! connect → transient; a timeout or a reset once the request may have been written → ambiguous;
//! other statuses → permanent.

use std::time::Duration;

use serde_json::json;

use crate::clock::Clock;
use crate::domain::{Channel, Content, SuppressionSource};
use crate::policy::{parse_retry_after, Outcome};
use crate::ports::{GatePartition, Provider, SendRequest};
use crate::providers::secret::Token;

/// Largest response body read for a receipt.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

pub struct HttpConfig {
    pub endpoint: reqwest::Url,
    /// Sent as `Authorization: Bearer …`; never logged.
    pub token: Token,
    pub timeout: Duration,
    /// Whether the remote honours `Idempotency-Key` (the contract says it must).
    pub idempotent: bool,
    /// The gate partition; defaults to the endpoint's host.
    pub partition: String,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("endpoint", &self.endpoint.as_str())
            .field("token", &self.token)
            .field("timeout", &self.timeout)
            .field("idempotent", &self.idempotent)
            .field("partition", &self.partition)
            .finish()
    }
}

/// One client per cold start; connections are pooled and reused.
#[derive(Debug, Clone)]
pub struct HttpProvider<C> {
    client: reqwest::Client,
    cfg: std::sync::Arc<HttpConfig>,
    clock: C,
}

impl<C: Clock> HttpProvider<C> {
    pub fn new(cfg: HttpConfig, clock: C) -> Result<Self, reqwest::Error> {
        crate::aws::bootstrap::install_crypto();
        let client = reqwest::Client::builder()
            .timeout(cfg.timeout)
            // A connect timeout is a failure before the request was written: transient.
            .connect_timeout((cfg.timeout / 2).min(Duration::from_secs(3)))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            client,
            cfg: std::sync::Arc::new(cfg),
            clock,
        })
    }
}

fn payload(request: &SendRequest) -> serde_json::Value {
    let mut body = json!({
        "delivery_key": request.delivery_key.as_str(),
        "channel": request.recipient.channel().as_str(),
        "recipient": request.recipient.expose(),
        "payload_version": request.payload_version,
    });
    match &request.content {
        Content::Text {
            subject,
            body: text,
        } => {
            body["subject"] = json!(subject);
            body["body"] = json!(text);
        }
        Content::Template {
            template_id,
            template_data,
        } => {
            body["subject"] = json!("");
            body["body"] = json!("");
            body["template_id"] = json!(template_id);
            body["template_data"] = json!(template_data);
        }
    }
    body
}

impl<C: Clock> Provider for HttpProvider<C> {
    fn honours_idempotency_key(&self) -> bool {
        self.cfg.idempotent
    }

    fn partition(&self, channel: Channel) -> GatePartition {
        GatePartition::new(channel, self.cfg.partition.clone())
    }

    async fn send(&self, request: &SendRequest) -> Outcome {
        let mut req = self
            .client
            .post(self.cfg.endpoint.clone())
            .header("Idempotency-Key", request.delivery_key.as_str())
            .json(&payload(request));
        match self.cfg.token.current().await {
            Ok(Some(token)) => req = req.bearer_auth(token),
            Ok(None) => {}
            // Nothing was sent: an attempt, retried with backoff.
            Err(e) => {
                tracing::warn!(error = %e.0, "no bearer token");
                return Outcome::Transient {
                    error: "token_unavailable".into(),
                };
            }
        }
        let resp = match req.send().await {
            Ok(resp) => resp,
            Err(e) => return classify_error(&e),
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, self.clock.now()));
        match status {
            200..=299 | 409 => Outcome::Delivered {
                receipt: receipt(resp).await,
            },
            429 => Outcome::Throttled { retry_after },
            // A secret may have been rotated: read it again and retry (an attempt spent).
            401 if self.cfg.token.refused().await => Outcome::Transient {
                error: "http_401".into(),
            },
            // The provider contract: 410 Gone declares the address dead (docs/design.md,
            // "Suppressions").
            410 => Outcome::Gone {
                error: "http_410".into(),
                source: SuppressionSource::Http410,
            },
            408 | 500..=599 => Outcome::Transient {
                error: format!("http_{status}"),
            },
            _ => Outcome::Permanent {
                error: format!("http_{status}"),
            },
        }
    }
}

fn classify_error(e: &reqwest::Error) -> Outcome {
    if e.is_connect() {
        Outcome::Transient {
            error: "connect_failed".into(),
        }
    } else if e.is_timeout() {
        Outcome::Ambiguous {
            error: "timeout_after_write".into(),
        }
    } else {
        // Reset, truncated response, …: the request may have been acted on.
        Outcome::Ambiguous {
            error: "connection_lost".into(),
        }
    }
}

/// The JSON `id` of a success response, if any; a body that is not JSON is no error. The body
/// is read a chunk at a time and abandoned past `MAX_RESPONSE_BYTES`: a provider that answers
/// 2xx with a huge (or endless) body costs neither memory nor the rest of the timeout.
async fn receipt(mut resp: reqwest::Response) -> Option<String> {
    let max = u64::try_from(MAX_RESPONSE_BYTES).unwrap_or(u64::MAX);
    if resp.content_length().is_some_and(|n| n > max) {
        return None;
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = resp.chunk().await.ok()? {
        if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return None;
        }
        bytes.extend_from_slice(&chunk);
    }
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    match &v["id"] {
        serde_json::Value::String(s) => Some(s.chars().take(200).collect()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
