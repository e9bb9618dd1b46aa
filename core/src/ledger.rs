//! The delivery state machine (docs/design.md, "States and transitions") as a type.
//!
//! [`DeliveryRecord`] is the ledger item. Its fields are private and the only way to make a new
//! one is [`apply`]: the current record (or `None`, the implicit `scheduled` state), a
//! [`Change`] and a [`Ctx`] in; the next record or a [`Refused`] out. Every transition the
//! design does not list is refused. The ledger adapters persist the result with one
//! conditional write on `seq` (and the expected status), so every transition is atomic.

use std::collections::BTreeMap;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
pub use crate::domain::wire::Unknown;
use crate::domain::{Channel, DeadReason, DeliveryKey, ReminderId, SubscriberId};
use crate::policy::{OutcomeClass, RetryPolicy};
pub use change::{Change, Ctx, Refused, Why};
pub use detail::{Detail, QUIET_HOURS_ERROR};
pub(crate) use packed::packed_fence;
pub use status::Status;
pub use transitions::{apply, HELD_FOR_QUIET_HOURS};

mod change;
mod detail;
mod packed;
mod status;
mod transitions;

/// Transitions kept on the item; each write adds one and drops the oldest beyond this.
pub const HISTORY_BOUND: u64 = 16;
/// How long a claim to make a DLQ copy holds before another worker may take it over: longer
/// than any invocation (15 minutes), so a live claim never lapses.
pub const COPY_CLAIM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(16 * 60);
/// Longest classified error kept on the item.
pub const MAX_ERROR_LEN: usize = 200;

/// A claim's proof of ownership; outcome writes are fenced by it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaseToken(String);

impl LeaseToken {
    pub fn generate(rng: &mut impl Rng) -> Self {
        Self(format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The history detail of a horizon move (an edit's, or intake's for a due time moved later).
pub const HORIZON_MOVED: &str = Detail::HorizonMoved.as_str();

/// Who redrove a delivery, kept in its history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedriveAudit {
    pub batch_id: String,
    pub operator: String,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub at: Timestamp,
    pub from: Status,
    pub to: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redrive: Option<RedriveAudit>,
}

/// Whose delivery an item is: what the outcome events name (docs/design.md, "Outcome events"). The
/// delivery key is a one-way hash of it, so the item keeps it; items written before it was kept
/// carry none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub reminder_id: ReminderId,
    pub subscriber_id: SubscriberId,
    pub channel: Channel,
    /// The channel whose death this delivery fell back from (docs/design.md, "Fallback chain").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<Channel>,
    /// Claimed as the head of the subscriber's fallback order (docs/design.md, "Fallback chain"):
    /// named by the first claim, it keeps this channel the chain's head whatever the order says
    /// later. A delivery claimed with no order, or outside it, is no chain's head.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub chain_head: bool,
    /// The fallback order's channels the reminder listed, as the first claim read them
    /// (docs/design.md, "Fallback chain": the chain is recorded on both ledger items): a death
    /// whose order as it is then names no next channel (cleared, or reordered with this channel
    /// last, before a redrive say) hands on to the next of it. Empty for a delivery claimed with no
    /// order, or outside it, or written before chains were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<Channel>,
    /// What a newer version wrote here that this one does not know.
    #[serde(flatten)]
    pub unknown: Unknown,
}

impl Origin {
    /// The origin a queue message names (its delivery key is derived from the same three).
    pub fn of(msg: &crate::domain::DeliveryMessage) -> Self {
        Self {
            reminder_id: msg.reminder_id.clone(),
            subscriber_id: msg.subscriber_id.clone(),
            channel: msg.channel,
            fallback_from: msg.fallback_from,
            chain_head: false,
            chain: Vec::new(),
            unknown: Default::default(),
        }
    }
}

/// The ledger item (deliveries table, key `delivery_key`). Attribute names are the field names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    delivery_key: DeliveryKey,
    status: Status,
    /// Transition number: bumped by every write, the optimistic-concurrency check.
    seq: u64,
    attempt_count: u32,
    throttle_count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_token: Option<LeaseToken>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_expires_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    next_eligible_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_outcome_class: Option<OutcomeClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dead_reason: Option<DeadReason>,
    /// When the DLQ copy of this death was made: a dead delivery has exactly one copy, and a
    /// later message for it adds none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dlq_copied_at: Option<Timestamp>,
    /// A worker is making the DLQ copy (since then): others make none. A claim older than
    /// [`COPY_CLAIM_TIMEOUT`] is a crashed worker's, and may be taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dlq_copy_claimed_at: Option<Timestamp>,
    /// The lease a delivery was under when it died from `sending` (a lapsed one, when another
    /// worker resolved it): only that worker can reconcile it, if its send turned out to
    /// succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    died_under_lease: Option<LeaseToken>,
    /// The worker making the DLQ copy: its token, and since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dlq_copy_claim: Option<LeaseToken>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    provider_receipt: Option<String>,
    payload_version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<RetryPolicy>,
    first_seen_at: Timestamp,
    updated_at: Timestamp,
    /// Keyed by transition number (as text: DynamoDB map keys are strings).
    history: BTreeMap<String, HistoryEntry>,
    /// DynamoDB TTL, epoch seconds.
    expires_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    origin: Option<Origin>,
    /// The channel this delivery's death fell back to (docs/design.md, "Fallback chain"): its own
    /// delivery, keyed by that channel, whose origin names this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fallback_to: Option<Channel>,
    /// An attempt of this delivery may have reached the person: a timeout after the request
    /// was written, a lease that lapsed mid-send, or an accepted send. Once set, never
    /// cleared (a redrive included): no fallback takes over from it (docs/design.md, "Fallback
    /// chain").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    maybe_sent: bool,
    /// What a newer version wrote on the item that this one does not know.
    #[serde(flatten)]
    unknown: Unknown,
}

impl DeliveryRecord {
    pub fn key(&self) -> &DeliveryKey {
        &self.delivery_key
    }
    pub fn status(&self) -> Status {
        self.status
    }
    pub fn seq(&self) -> u64 {
        self.seq
    }
    pub fn attempt_count(&self) -> u32 {
        self.attempt_count
    }
    pub fn throttle_count(&self) -> u32 {
        self.throttle_count
    }
    pub fn lease_token(&self) -> Option<&LeaseToken> {
        self.lease_token.as_ref()
    }
    pub fn lease_expires_at(&self) -> Option<Timestamp> {
        self.lease_expires_at
    }
    pub fn next_eligible_at(&self) -> Option<Timestamp> {
        self.next_eligible_at
    }
    pub fn last_outcome_class(&self) -> Option<OutcomeClass> {
        self.last_outcome_class
    }
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
    /// When a deferred delivery is held for the recipient's quiet hours, the time they end
    /// (its next eligible time); `None` for any other state or deferral.
    pub fn held_for_quiet_hours_until(&self) -> Option<Timestamp> {
        if self.status != Status::Deferred {
            return None;
        }
        // A hold is the last write until the next claim.
        let (_, last) = self.history().into_iter().last()?;
        let quiet = match last.detail.as_deref().and_then(Detail::parse) {
            Some(Detail::HeldForQuietHours) => true,
            // Written before holds were named apart: the breaker's code, told by the error.
            Some(Detail::HeldByBreaker) => self
                .last_error()
                .is_some_and(|e| e.starts_with(detail::QUIET_HOURS_ERROR)),
            _ => false,
        };
        self.next_eligible_at.filter(|_| quiet)
    }
    pub fn dead_reason(&self) -> Option<DeadReason> {
        self.dead_reason
    }
    pub fn dlq_copied_at(&self) -> Option<Timestamp> {
        self.dlq_copied_at
    }

    pub fn dlq_copy_claimed_at(&self) -> Option<Timestamp> {
        self.dlq_copy_claimed_at
    }

    /// When it last went dead: the time its evidence states, however often it is looked at.
    pub fn dead_at(&self) -> Option<Timestamp> {
        self.last_death().map(|(_, h)| h.at)
    }

    /// The history entry of its last move into `dead`, with its transition number, while dead.
    fn last_death(&self) -> Option<(u64, &HistoryEntry)> {
        if self.status != Status::Dead {
            return None;
        }
        self.history()
            .into_iter()
            .rev()
            .find(|(_, h)| h.to == Status::Dead && h.from != Status::Dead)
    }

    /// The transition number of its last move into `dead`: one death, told apart from a later
    /// one (after a redrive) even within the same millisecond. `None` when not dead, or when the
    /// bounded history no longer holds that move.
    pub fn death_number(&self) -> Option<u64> {
        self.last_death().map(|(n, _)| n)
    }

    /// The token of the worker making this death's DLQ copy, while its claim holds.
    pub fn dlq_copy_claim(&self) -> Option<&LeaseToken> {
        self.dlq_copy_claim.as_ref()
    }

    pub fn provider_receipt(&self) -> Option<&str> {
        self.provider_receipt.as_deref()
    }
    /// The lease a delivery died under from `sending`: only its holder may reconcile it.
    pub fn died_under_lease(&self) -> Option<&LeaseToken> {
        self.died_under_lease.as_ref()
    }
    pub fn payload_version(&self) -> u64 {
        self.payload_version
    }
    pub fn policy(&self) -> Option<&RetryPolicy> {
        self.policy.as_ref()
    }
    pub fn first_seen_at(&self) -> Timestamp {
        self.first_seen_at
    }
    pub fn updated_at(&self) -> Timestamp {
        self.updated_at
    }
    pub fn expires_at(&self) -> i64 {
        self.expires_at
    }
    /// Whose delivery this is, when a writer knew it.
    pub fn origin(&self) -> Option<&Origin> {
        self.origin.as_ref()
    }
    /// The channel this delivery's death fell back to.
    pub fn fallback_to(&self) -> Option<Channel> {
        self.fallback_to
    }
    /// Whether an attempt may have reached the person (docs/design.md, "Fallback chain"): recorded
    /// by every write that learns it, and read from the history for items written before it was
    /// kept.
    pub fn may_have_reached(&self) -> bool {
        self.maybe_sent
            || self.history.values().any(|h| {
                h.to == Status::Delivered
                    || h.detail
                        .as_deref()
                        .is_some_and(|d| d == "ambiguous" || d.starts_with("lease expired"))
            })
    }
    /// The channel whose death this delivery fell back from.
    pub fn fallback_from(&self) -> Option<Channel> {
        self.origin.as_ref().and_then(|o| o.fallback_from)
    }
    /// Transitions, oldest first.
    pub fn history(&self) -> Vec<(u64, &HistoryEntry)> {
        let mut h: Vec<(u64, &HistoryEntry)> = self
            .history
            .iter()
            .filter_map(|(k, v)| k.parse().ok().map(|n| (n, v)))
            .collect();
        h.sort_by_key(|(n, _)| *n);
        h
    }
}

impl DeliveryRecord {
    /// What a newer version wrote on the item that this one does not know.
    pub fn unknown(&self) -> &Unknown {
        &self.unknown
    }

    fn fresh(ctx: &Ctx) -> Self {
        Self {
            delivery_key: ctx.key.clone(),
            status: Status::Scheduled,
            seq: 0,
            attempt_count: 0,
            throttle_count: 0,
            lease_token: None,
            lease_expires_at: None,
            next_eligible_at: None,
            last_outcome_class: None,
            last_error: None,
            dead_reason: None,
            dlq_copied_at: None,
            dlq_copy_claimed_at: None,
            died_under_lease: None,
            dlq_copy_claim: None,
            provider_receipt: None,
            payload_version: 0,
            policy: None,
            first_seen_at: ctx.now,
            updated_at: ctx.now,
            history: BTreeMap::new(),
            expires_at: ctx.expires_at,
            origin: None,
            fallback_to: None,
            maybe_sent: false,
            unknown: Unknown::default(),
        }
    }

    fn clear_lease(&mut self) {
        self.lease_token = None;
        self.lease_expires_at = None;
    }

    fn set_error(&mut self, error: Option<&str>) {
        if let Some(e) = error {
            let mut e = e.to_owned();
            if e.len() > MAX_ERROR_LEN {
                let mut cut = MAX_ERROR_LEN;
                while !e.is_char_boundary(cut) {
                    cut -= 1;
                }
                e.truncate(cut);
            }
            self.last_error = Some(e);
        }
    }

    fn push_history(&mut self, entry: HistoryEntry) {
        self.history.insert(self.seq.to_string(), entry);
        if self.seq > HISTORY_BOUND {
            self.history.remove(&(self.seq - HISTORY_BOUND).to_string());
        }
    }
}

#[cfg(test)]
mod tests;
