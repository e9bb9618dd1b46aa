//! Dead letters, the one place their evidence is built (docs/design.md, "Dead letters and
//! redrive"): the original body, the reason, and what the ledger knew — attempts, first seen, last
//! error, policy version — or, for a message that never reached a claim, what the consumer knew.

use super::{Action, InFlight};
use crate::clock::Timestamp;
use crate::consumer::config::ConsumerConfig;
use crate::consumer::event::queue_name;
use crate::deadletter::{DeadLetter, Evidence};
use crate::domain::DeadReason;
use crate::ledger::{DeliveryRecord, Status};
use crate::ports::queue::{message_size, MAX_MESSAGE_BYTES};
use crate::ports::{DeadLetters, PortError, Ports};

/// What the evidence says about the delivery.
pub(super) struct Facts {
    attempts: u32,
    first_seen_at: Option<Timestamp>,
    last_error: Option<String>,
    policy_version: Option<String>,
}

impl Facts {
    /// From the ledger item that went dead.
    pub(super) fn of(record: &DeliveryRecord) -> Self {
        Self {
            attempts: record.attempt_count(),
            first_seen_at: Some(record.first_seen_at()),
            last_error: record.last_error().map(str::to_owned),
            policy_version: record.policy().map(|p| p.version.clone()),
        }
    }

    /// From the ledger item our own death wrote; a delivery never claimed carries no policy
    /// snapshot, so the consumer's policy is named.
    pub(super) fn of_ours(record: &DeliveryRecord, cfg: &ConsumerConfig) -> Self {
        let mut facts = Self::of(record);
        facts.last_error = facts.last_error.map(|e| short(&e));
        if facts.policy_version.is_none() {
            facts.policy_version = Some(cfg.policy.version.clone());
        }
        facts
    }

    /// For a delivery that never reached a claim: no attempt, the consumer's policy.
    pub(super) fn unclaimed(
        first_seen_at: Option<Timestamp>,
        error: &str,
        cfg: &ConsumerConfig,
    ) -> Self {
        Self {
            attempts: 0,
            first_seen_at,
            last_error: Some(short(error)),
            policy_version: Some(cfg.policy.version.clone()),
        }
    }
}

/// The body as received, unless it and the evidence would not fit in one SQS message (a body
/// near 256 KiB): then its head, with the truncation said in the evidence. A copy that does not
/// fit would be refused, and the message would loop to `receive_count_exceeded`.
fn fit_body<'b>(body: &'b str, evidence: &mut Evidence, reason: DeadReason) -> &'b str {
    // Room for the note added below.
    const MARGIN: usize = 128;
    let attrs = DeadLetter::new(reason, evidence.clone()).to_attributes();
    let attrs_size = message_size("", &attrs);
    if body.len() + attrs_size + MARGIN <= MAX_MESSAGE_BYTES {
        return body;
    }
    let mut cut = MAX_MESSAGE_BYTES
        .saturating_sub(attrs_size + MARGIN)
        .min(body.len());
    while !body.is_char_boundary(cut) {
        cut -= 1;
    }
    let note = format!("body truncated from {} bytes", body.len());
    evidence.last_error = Some(match evidence.last_error.take() {
        Some(e) => format!("{e}; {note}"),
        None => note,
    });
    &body[..cut]
}

/// Evidence stays short (the ledger keeps as much).
fn short(error: &str) -> String {
    let max = crate::ledger::MAX_ERROR_LEN;
    let mut cut = error.len().min(max);
    while !error.is_char_boundary(cut) {
        cut -= 1;
    }
    error[..cut].to_owned()
}

impl<P: Ports> InFlight<'_, P> {
    /// Copy the message, as received, to its channel's DLQ with the reason and evidence.
    pub(super) async fn dead_letter(
        &self,
        reason: DeadReason,
        facts: Facts,
        now: Timestamp,
    ) -> Result<(), PortError> {
        let queue_url = self.consumer.queue_urls.get(self.inc.channel);
        let mut evidence = Evidence {
            attempts: facts.attempts,
            first_seen_at: facts.first_seen_at,
            dead_at: now,
            last_error: facts.last_error,
            policy_version: facts.policy_version,
            source_queue: queue_name(queue_url).to_owned(),
        };
        let body = fit_body(&self.inc.body, &mut evidence, reason);
        let letter = DeadLetter::new(reason, evidence);
        let dlq = self.consumer.ports.dead_letters();
        dlq.dead_letter(self.inc.channel, body, &letter).await
    }

    /// The DLQ copy of a dead delivery, exactly once: none when the ledger says it was made
    /// or another worker is making it; else claim the copy on the ledger (one conditional
    /// write, so two records for one death cannot both copy), copy (stating when it died,
    /// however late it is made), and record it. A crash after the claim leaves the copy to a
    /// later message once the claim times out.
    /// Returns when another worker's claim to copy lapses, if one holds: a record that only
    /// came to make sure of the copy waits for it, so a copy that failed is made later.
    pub(super) async fn copy_once(
        &mut self,
        reason: DeadReason,
        dead: DeliveryRecord,
        facts: Facts,
    ) -> Result<Option<Timestamp>, PortError> {
        use crate::delivery::{transition, Written};
        use crate::ledger::{Change, Ctx, LeaseToken, COPY_CLAIM_TIMEOUT};
        // A recipient's choice is on the ledger and in the events: nothing to redrive.
        if dead.dlq_copied_at().is_some() || reason.is_recipients_choice() {
            return Ok(None);
        }
        let now = self.now();
        let ctx = Ctx {
            key: dead.key().clone(),
            now,
            expires_at: dead.expires_at(),
            // Dead already: the item keeps the origin its earlier writes named.
            origin: None,
        };
        let ledger = self.consumer.ports.ledger();
        let dead_at = dead.dead_at().unwrap_or(now);
        // Our own token: two workers claiming in the same millisecond write different items,
        // so neither mistakes the other's claim for its own.
        let token = LeaseToken::generate(self.rng);
        let change = Change::ClaimDlqCopy { token };
        let claimed = match transition(ledger, Some(dead), change, &ctx).await? {
            Written::Applied(claimed) => claimed,
            // Copied, being copied by another worker, or no longer dead (reconciled).
            Written::Refused { current, .. } => {
                let pending = current
                    .as_ref()
                    .filter(|c| c.status() == Status::Dead && c.dlq_copied_at().is_none())
                    .and_then(|c| c.dlq_copy_claimed_at());
                return Ok(pending.map(|at| at.plus(COPY_CLAIM_TIMEOUT)));
            }
        };
        self.dead_letter(reason, facts, dead_at).await?;
        match transition(ledger, Some(claimed), Change::CopiedToDlq, &ctx).await {
            Ok(Written::Applied(_)) => {}
            // The copy exists; its claim times out, and a later message could copy again.
            Ok(Written::Refused { refused, .. }) => {
                tracing::warn!(refused = ?refused, "the ledger refused the DLQ copy's record");
            }
            Err(e) => tracing::warn!(error = %e, "could not record the DLQ copy on the ledger"),
        }
        Ok(None)
    }

    /// A delivery found dead, by a message that came later (perhaps after a crash before its
    /// copy): make sure the DLQ copy exists, or wait for the worker making it. Never acked
    /// before the copy is made or being made.
    pub(super) async fn ensure_copied(
        &mut self,
        msg: &crate::domain::DeliveryMessage,
        record: DeliveryRecord,
        now: Timestamp,
    ) -> Result<Action, PortError> {
        let reason = record.dead_reason().unwrap_or(DeadReason::Rejected);
        let facts = Facts::of(&record);
        match self.copy_once(reason, record, facts).await? {
            // Another worker is copying: look again once its claim lapses, in case its copy
            // failed.
            Some(until) => {
                let again = until.plus(std::time::Duration::from_secs(1));
                self.hold(msg, again, now).await
            }
            None => Ok(Action::Ack),
        }
    }

    /// A body that is not a message this consumer can read: dead as `schema`, at once.
    pub(super) async fn dead_schema(
        &mut self,
        class: &'static str,
        now: Timestamp,
    ) -> Result<Action, PortError> {
        let facts = Facts::unclaimed(None, class, &self.consumer.cfg);
        self.dead_letter(DeadReason::Schema, facts, now).await?;
        self.m.dead(DeadReason::Schema);
        tracing::warn!(message_id = %self.inc.message_id, error = class, next_action = "dead", "undecodable message dead-lettered");
        Ok(Action::Ack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::RetryPolicy;

    #[test]
    fn unclaimed_facts_carry_the_consumers_policy_and_no_attempt() {
        let cfg = ConsumerConfig {
            policy: RetryPolicy {
                version: "v9".into(),
                ..RetryPolicy::default()
            },
            ..ConsumerConfig::default()
        };
        let f = Facts::unclaimed(Some(Timestamp::from_millis(3)), "reminder_not_found", &cfg);
        assert_eq!(f.attempts, 0);
        assert_eq!(f.first_seen_at, Some(Timestamp::from_millis(3)));
        assert_eq!(f.last_error.as_deref(), Some("reminder_not_found"));
        assert_eq!(f.policy_version.as_deref(), Some("v9"));
    }
}
