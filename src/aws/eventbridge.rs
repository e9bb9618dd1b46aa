//! The [`EventBus`] on EventBridge: `PutEvents` to the bus named by `EVENT_BUS_NAME`, ten
//! entries a call (the service's limit), each entry's own error code reported back so the
//! handler fails exactly the records whose events were refused.

use aws_sdk_eventbridge::operation::put_events::PutEventsError;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use super::error::{port_error, Kind};
use crate::config::{ConfigError, Vars};
use crate::events::{Settled, DETAIL_TYPE, ERASED_DETAIL_TYPE, SOURCE};
use crate::ports::events::{EventBus, Rejected, OP_PUBLISH};
use crate::ports::PortError;

/// The variable naming the bus events go to.
pub const EVENT_BUS_VAR: &str = "EVENT_BUS_NAME";
/// Every variable the adapter reads.
pub const VARS: [&str; 1] = [EVENT_BUS_VAR];
/// Entries per `PutEvents` call (EventBridge's limit).
pub const PUT_EVENTS_BATCH: usize = 10;

#[derive(Debug, Clone)]
pub struct EventBridgeBus {
    client: aws_sdk_eventbridge::Client,
    bus: String,
}

impl EventBridgeBus {
    pub fn new(client: aws_sdk_eventbridge::Client, bus: impl Into<String>) -> Self {
        Self {
            client,
            bus: bus.into(),
        }
    }

    /// The bus named by `EVENT_BUS_NAME` (required).
    pub fn from_lookup(
        client: aws_sdk_eventbridge::Client,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let bus = Vars::new(get).required(EVENT_BUS_VAR)?;
        Ok(Self::new(client, bus))
    }

    pub fn bus(&self) -> &str {
        &self.bus
    }

    /// The bus named by `EVENT_BUS_NAME`, if set, on `sdk` (the API's, for erasures).
    pub fn optional(
        sdk: &aws_config::SdkConfig,
        get: impl Fn(&str) -> Option<String>,
    ) -> Option<Self> {
        let bus = get(EVENT_BUS_VAR).filter(|b| !b.trim().is_empty())?;
        Some(Self::new(aws_sdk_eventbridge::Client::new(sdk), bus))
    }

    /// One `Subscriber Erased` event: `detail` is the erasure's answer (counts only).
    pub async fn publish_erased(
        &self,
        detail: &serde_json::Value,
        at: crate::clock::Timestamp,
    ) -> Result<(), PortError> {
        let entry = PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(SOURCE)
            .detail_type(ERASED_DETAIL_TYPE)
            .detail(detail.to_string())
            .time(aws_smithy_types::DateTime::from_millis(at.as_millis()))
            .build();
        let out = self
            .client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|e| port_error(OP_PUBLISH, e, kind))?;
        match out
            .entries
            .unwrap_or_default()
            .first()
            .and_then(|r| r.error_code.clone())
        {
            Some(code) => Err(PortError::Refused {
                op: OP_PUBLISH,
                message: format!("the erasure event was refused: {code}"),
            }),
            None => Ok(()),
        }
    }

    fn entry(&self, event: &Settled) -> PutEventsRequestEntry {
        PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(SOURCE)
            .detail_type(DETAIL_TYPE)
            .detail(event.detail_json())
            .time(aws_smithy_types::DateTime::from_millis(
                event.at.as_millis(),
            ))
            .build()
    }

    /// One call of at most ten; the refused entries' indexes are offset by `first`.
    async fn put(&self, first: usize, events: &[Settled]) -> Result<Vec<Rejected>, PortError> {
        let entries = events.iter().map(|e| self.entry(e)).collect();
        let out = self
            .client
            .put_events()
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| port_error(OP_PUBLISH, e, kind))?;
        let results = out.entries.unwrap_or_default();
        let mut rejected = Vec::new();
        for i in 0..events.len() {
            let code = match results.get(i) {
                Some(r) => r.error_code.clone(),
                // Fewer results than entries while some failed: nothing says which.
                None if out.failed_entry_count > 0 => Some("NoResult".to_owned()),
                None => None,
            };
            if let Some(code) = code {
                rejected.push(Rejected {
                    index: first + i,
                    code,
                });
            }
        }
        Ok(rejected)
    }
}

/// `PutEvents` names one error of its own; throttling and refusals come by code.
fn kind(e: &PutEventsError) -> Kind {
    match e {
        PutEventsError::InternalException(_) => Kind::Unavailable,
        other => match other.code() {
            Some("ThrottlingException") => Kind::Throttled,
            Some("ResourceNotFoundException" | "AccessDeniedException" | "ValidationException") => {
                Kind::Refused
            }
            _ => Kind::Unavailable,
        },
    }
}

impl EventBus for EventBridgeBus {
    /// In calls of ten, in order. A call that fails outright ends the publish with `Err`;
    /// the calls before it were published (their records will publish again: at least once).
    async fn publish(&self, events: &[Settled]) -> Result<Vec<Rejected>, PortError> {
        let mut rejected = Vec::new();
        for (n, chunk) in events.chunks(PUT_EVENTS_BATCH).enumerate() {
            rejected.extend(self.put(n * PUT_EVENTS_BATCH, chunk).await?);
        }
        Ok(rejected)
    }
}
