//! Dead letters as evidence (docs/design.md, "Dead letters and redrive"): a DLQ copy keeps the
//! original body and adds two message attributes, `reason` (the wire string, for filtering) and
//! `evidence` (JSON). No incoming attribute is copied over, and nothing here holds a recipient or
//! content.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::domain::DeadReason;

pub const ATTR_REASON: &str = "reason";
pub const ATTR_EVIDENCE: &str = "evidence";

/// What an operator needs to explain a dead delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen_at: Option<Timestamp>,
    pub dead_at: Timestamp,
    /// Classified and short, never personal data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_version: Option<String>,
    pub source_queue: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub reason: DeadReason,
    pub evidence: Option<Evidence>,
}

impl DeadLetter {
    pub fn new(reason: DeadReason, evidence: Evidence) -> Self {
        Self {
            reason,
            evidence: Some(evidence),
        }
    }

    pub fn to_attributes(&self) -> BTreeMap<String, String> {
        let mut attrs = BTreeMap::new();
        attrs.insert(ATTR_REASON.to_owned(), self.reason.as_str().to_owned());
        if let Some(e) = &self.evidence {
            // Plain data: serializing cannot fail.
            attrs.insert(
                ATTR_EVIDENCE.to_owned(),
                serde_json::to_string(e).unwrap_or_default(),
            );
        }
        attrs
    }

    /// Read a DLQ message's attributes. A message without a reason reached the DLQ through
    /// the queue's redrive policy — a crash loop — and counts as `receive_count_exceeded`; a
    /// reason this version does not know (a newer consumer's) is kept as it is; unreadable
    /// evidence is dropped, the reason kept.
    pub fn from_attributes(attrs: &BTreeMap<String, String>) -> Self {
        let reason = attrs
            .get(ATTR_REASON)
            .map_or(DeadReason::ReceiveCountExceeded, |r| DeadReason::read(r));
        let evidence = attrs
            .get(ATTR_EVIDENCE)
            .and_then(|e| serde_json::from_str(e).ok());
        Self { reason, evidence }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_two_attributes() {
        let letter = DeadLetter::new(
            DeadReason::AttemptsExhausted,
            Evidence {
                attempts: 5,
                first_seen_at: Some(Timestamp::from_millis(1)),
                dead_at: Timestamp::from_millis(2),
                last_error: Some("http_503".into()),
                policy_version: Some("v1".into()),
                source_queue: "sms".into(),
            },
        );
        let attrs = letter.to_attributes();
        assert_eq!(attrs.len(), 2);
        assert_eq!(attrs[ATTR_REASON], "attempts_exhausted");
        assert_eq!(DeadLetter::from_attributes(&attrs), letter);
    }

    #[test]
    fn no_reason_means_receive_count_exceeded() {
        let letter = DeadLetter::from_attributes(&BTreeMap::new());
        assert_eq!(letter.reason, DeadReason::ReceiveCountExceeded);
        assert_eq!(letter.evidence, None);
        let mut odd = BTreeMap::new();
        odd.insert(ATTR_REASON.to_owned(), "from_the_future".to_owned());
        odd.insert(ATTR_EVIDENCE.to_owned(), "{not json".to_owned());
        // A newer consumer's reason is carried on, never mistaken for a crash loop.
        assert_eq!(
            DeadLetter::from_attributes(&odd).reason,
            DeadReason::Unknown("from_the_future")
        );
    }
}
