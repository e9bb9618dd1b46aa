//! One record's pipeline (DESIGN §4–5, issue order): decode → not_before → reminder
//! (unknown, cancelled, stale) → provider gate → claim → send → fenced outcome → act.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::RngExt;

use super::{Action, Consumer, Incoming, Metrics};
use crate::clock::{Clock, Timestamp};
use crate::deadletter::{DeadLetter, Evidence};
use crate::delivery::state::{Change, Ctx, DeliveryRecord, LeaseToken};
use crate::delivery::{claim, transition, Claim, ClaimRequest, Written};
use crate::domain::{DeadReason, DecodeError, DeliveryMessage, Reminder, ReminderStatus};
use crate::policy::{decide, wait_until, Next, Outcome, OutcomeClass, Spent, Wait, MAX_DELAY_SECS};
use crate::ports::{
    DeadLetters, DeliveryQueue, Gate, GatePartition, OutgoingMessage, PortError, Ports, Provider,
    ReminderStore, SendRequest,
};

fn decode_class(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Malformed(_) => "malformed_message",
        DecodeError::MissingVersion => "missing_version",
        DecodeError::UnknownVersion(_) => "unknown_version",
        DecodeError::KeyMismatch => "key_mismatch",
    }
}

fn outcome_error(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Transient { error }
        | Outcome::Permanent { error }
        | Outcome::Ambiguous { error }
        | Outcome::Blocked { error, .. } => Some(error.clone()),
        Outcome::Throttled { .. } => Some("throttled".into()),
        Outcome::Delivered { .. } => None,
    }
}

impl<P: Ports> Consumer<P> {
    pub(super) async fn process(
        &self,
        inc: &Incoming,
        rng: &mut StdRng,
        m: &mut Metrics,
    ) -> Result<Action, PortError> {
        let now = self.ports.clock().now();
        let msg = match DeliveryMessage::decode(&inc.body) {
            Ok(msg) if msg.channel == inc.channel => msg,
            Ok(_) => return self.dead_schema(inc, "channel_mismatch", now, m).await,
            Err(e) => return self.dead_schema(inc, decode_class(&e), now, m).await,
        };
        tracing::Span::current().record("delivery_key", msg.delivery_key.as_str());
        if let Some(not_before) = msg.not_before.filter(|nb| *nb > now) {
            return self.hold(inc, &msg, not_before, now, m).await;
        }
        let Some(reminder) = self.ports.reminders().get(&msg.reminder_id).await? else {
            return self.unknown_reminder(inc, &msg, now, m).await;
        };
        let ctx = self.ctx(&msg, &reminder, now);
        let Some(recipient) = reminder.recipients.get(&inc.channel).cloned() else {
            // The channel was edited away before dispatch: nothing to send here.
            return self.finish(inc, &msg, Change::Cancel, &ctx, m).await;
        };
        if reminder.status == ReminderStatus::Cancelled {
            return self.finish(inc, &msg, Change::Cancel, &ctx, m).await;
        }
        if reminder.is_stale_at(now) || reminder.status == ReminderStatus::Expired {
            return self.finish(inc, &msg, Change::Expire, &ctx, m).await;
        }
        if reminder.due_at > now {
            // Edited to a later time after it was enqueued: wait for the new due time.
            return self.hold(inc, &msg, reminder.due_at, now, m).await;
        }
        let request = SendRequest {
            delivery_key: msg.delivery_key.clone(),
            recipient,
            content: reminder.content.clone(),
            payload_version: reminder.payload_version,
        };
        let provider = self.ports.provider(inc.channel);
        let partition = provider.partition(&request);
        if let Some(until) = self.gate_closed_until(&partition, now).await? {
            m.deferred_gate += 1;
            let jitter = Duration::from_millis(rng.random_range(0..=1_000));
            log_transition(&msg, 0, "gate_closed", "hold", until.since(now));
            return self.hold(inc, &msg, until.plus(jitter), now, m).await;
        }
        // The lease counts from the claim, not from the start of the record; freshness is
        // checked again at that moment.
        let now = self.ports.clock().now();
        if reminder.is_stale_at(now) {
            return self.finish(inc, &msg, Change::Expire, &ctx, m).await;
        }
        let ctx = self.ctx(&msg, &reminder, now);
        let token = LeaseToken::generate(rng);
        let lease_expires_at = now.plus(self.cfg.lease);
        let req = ClaimRequest {
            token: token.clone(),
            lease_expires_at,
            payload_version: reminder.payload_version,
            policy: self.cfg.policy.clone(),
        };
        let record = match claim(self.ports.ledger(), req, &ctx).await? {
            Claim::Acquired(record) => record,
            Claim::AlreadyDelivered(_) => {
                m.duplicates_suppressed += 1;
                log_transition(&msg, 0, "duplicate", "ack", Duration::ZERO);
                return Ok(Action::Ack);
            }
            Claim::Finished(_) => return Ok(Action::Ack),
            Claim::Dead(record) => {
                // Died before (perhaps crashed before its DLQ copy): make sure the evidence exists.
                let reason = record.dead_reason().unwrap_or(DeadReason::Rejected);
                self.copy_to_dlq(inc, &record, reason, now).await?;
                return Ok(Action::Ack);
            }
            Claim::HeldByOther { until } => {
                return self
                    .hold(inc, &msg, until.plus(Duration::from_secs(1)), now, m)
                    .await
            }
            Claim::NotYetEligible { at } => return self.hold(inc, &msg, at, now, m).await,
            Claim::LeaseExpired(stale) => {
                match self
                    .take_over(inc, &msg, &reminder, stale, &token, &ctx, rng, m)
                    .await?
                {
                    Ok(record) => record,
                    Err(action) => return Ok(action),
                }
            }
        };
        let outcome = provider.send(&request).await;
        self.settle(
            inc, &msg, &reminder, record, token, outcome, &partition, rng, m,
        )
        .await
    }

    fn ctx(&self, msg: &DeliveryMessage, reminder: &Reminder, now: Timestamp) -> Ctx {
        Ctx {
            key: msg.delivery_key.clone(),
            now,
            expires_at: reminder
                .fresh_until
                .plus(self.cfg.retention)
                .as_epoch_seconds_ceil(),
        }
    }

    /// Cancel or expire before any claim: never sent.
    /// A delivery still `sending` was claimed by a worker that never recorded an outcome: wait
    /// for its lease, then resolve it by the ambiguous rule — never ack it as it is.
    async fn finish(
        &self,
        inc: &Incoming,
        msg: &DeliveryMessage,
        change: Change,
        ctx: &Ctx,
        m: &mut Metrics,
    ) -> Result<Action, PortError> {
        let cancelled = change == Change::Cancel;
        let written = transition(self.ports.ledger(), None, change, ctx).await?;
        match written {
            Written::Applied(_) if cancelled => m.cancelled += 1,
            Written::Applied(_) => m.expired += 1,
            Written::Refused {
                current: Some(r), ..
            } if r.status() == crate::delivery::state::Status::Sending => {
                return self.resolve_abandoned(inc, msg, r, ctx, m).await;
            }
            Written::Refused { .. } => {}
        }
        let what = if cancelled { "cancelled" } else { "stale" };
        tracing::info!(delivery_key = %ctx.key, outcome_class = what, next_action = "ack", "transition");
        Ok(Action::Ack)
    }

    async fn resolve_abandoned(
        &self,
        inc: &Incoming,
        msg: &DeliveryMessage,
        sending: DeliveryRecord,
        ctx: &Ctx,
        m: &mut Metrics,
    ) -> Result<Action, PortError> {
        let (Some(until), Some(stale_token)) =
            (sending.lease_expires_at(), sending.lease_token().cloned())
        else {
            return Ok(Action::Retry);
        };
        if until > ctx.now {
            return self
                .hold(inc, msg, until.plus(Duration::from_secs(1)), ctx.now, m)
                .await;
        }
        // Too late (stale or cancelled) to resend: the send may have happened, so it dies as
        // ambiguous, with its evidence, for reconciliation.
        let change = Change::Die {
            token: Some(stale_token),
            reason: DeadReason::Ambiguous,
            spends_attempt: true,
            error: Some("lease_expired_without_outcome".into()),
        };
        match transition(self.ports.ledger(), Some(sending), change, ctx).await? {
            Written::Applied(dead) => {
                m.dead(DeadReason::Ambiguous);
                log_transition(
                    msg,
                    dead.attempt_count(),
                    "ambiguous",
                    "dead",
                    Duration::ZERO,
                );
                self.copy_to_dlq(inc, &dead, DeadReason::Ambiguous, ctx.now)
                    .await?;
                Ok(Action::Ack)
            }
            Written::Refused { .. } => {
                let again = ctx.now.plus(Duration::from_secs(1));
                self.hold(inc, msg, again, ctx.now, m).await
            }
        }
    }

    /// The ambiguous rule (DESIGN §5): a lease ran out mid-send. Retry with the same key only
    /// when the provider deduplicates on it and the budget allows; otherwise dead `ambiguous`.
    #[allow(clippy::too_many_arguments)]
    async fn take_over(
        &self,
        inc: &Incoming,
        msg: &DeliveryMessage,
        reminder: &Reminder,
        stale: DeliveryRecord,
        token: &LeaseToken,
        ctx: &Ctx,
        rng: &mut StdRng,
        m: &mut Metrics,
    ) -> Result<Result<DeliveryRecord, Action>, PortError> {
        let Some(stale_token) = stale.lease_token().cloned() else {
            return Ok(Err(Action::Retry));
        };
        let policy = stale
            .policy()
            .cloned()
            .unwrap_or_else(|| self.cfg.policy.clone());
        let spent = Spent {
            attempts: stale.attempt_count(),
            throttles: stale.throttle_count(),
        };
        let ambiguous = Outcome::Ambiguous {
            error: "lease_expired_without_outcome".into(),
        };
        let idempotent = self.ports.provider(inc.channel).honours_idempotency_key();
        let next = decide(
            &policy,
            spent,
            &ambiguous,
            idempotent,
            reminder.fresh_until,
            ctx.now,
            rng,
        );
        let change = match next {
            Next::Dead(reason) => Change::Die {
                token: Some(stale_token),
                reason,
                spends_attempt: true,
                error: Some("lease_expired_without_outcome".into()),
            },
            _ => Change::Takeover {
                stale_token,
                token: token.clone(),
                lease_expires_at: ctx.now.plus(self.cfg.lease),
            },
        };
        let is_takeover = matches!(change, Change::Takeover { .. });
        match transition(self.ports.ledger(), Some(stale), change, ctx).await? {
            Written::Applied(record) if is_takeover => {
                log_transition(
                    msg,
                    record.attempt_count(),
                    "ambiguous",
                    "resend_same_key",
                    Duration::ZERO,
                );
                Ok(Ok(record))
            }
            Written::Applied(record) => {
                let reason = record.dead_reason().unwrap_or(DeadReason::Ambiguous);
                m.dead(reason);
                log_transition(
                    msg,
                    record.attempt_count(),
                    "ambiguous",
                    "dead",
                    Duration::ZERO,
                );
                self.copy_to_dlq(inc, &record, reason, ctx.now).await?;
                Ok(Err(Action::Ack))
            }
            // Another worker got there first: look again shortly.
            Written::Refused { .. } => {
                let again = ctx.now.plus(Duration::from_secs(1));
                self.hold(inc, msg, again, ctx.now, m).await.map(Err)
            }
        }
    }

    /// Record the provider's answer (fenced by our lease) and act on the policy's decision.
    #[allow(clippy::too_many_arguments)]
    async fn settle(
        &self,
        inc: &Incoming,
        msg: &DeliveryMessage,
        reminder: &Reminder,
        record: DeliveryRecord,
        token: LeaseToken,
        outcome: Outcome,
        partition: &GatePartition,
        rng: &mut StdRng,
        m: &mut Metrics,
    ) -> Result<Action, PortError> {
        let now = self.ports.clock().now();
        let ctx = self.ctx(msg, reminder, now);
        let policy = record
            .policy()
            .cloned()
            .unwrap_or_else(|| self.cfg.policy.clone());
        let spent = Spent {
            attempts: record.attempt_count(),
            throttles: record.throttle_count(),
        };
        let idempotent = self.ports.provider(inc.channel).honours_idempotency_key();
        let class = outcome.class();
        let error = outcome_error(&outcome);
        let outcome_retry_after = match &outcome {
            Outcome::Throttled { retry_after } => *retry_after,
            Outcome::Blocked { retry_after, .. } => Some(*retry_after),
            _ => None,
        };
        let ledger = self.ports.ledger();
        match decide(
            &policy,
            spent,
            &outcome,
            idempotent,
            reminder.fresh_until,
            now,
            rng,
        ) {
            Next::Delivered => {
                let receipt = match outcome {
                    Outcome::Delivered { receipt } => receipt,
                    _ => None,
                };
                let change = Change::Deliver { token, receipt };
                match transition(ledger, Some(record), change, &ctx).await? {
                    Written::Applied(done) => {
                        m.delivered += 1;
                        m.lateness_ms.push(now.as_millis() - msg.due_at.as_millis());
                        m.attempts.push(done.attempt_count());
                        log_transition(
                            msg,
                            done.attempt_count(),
                            "delivered",
                            "ack",
                            Duration::ZERO,
                        );
                    }
                    Written::Refused { refused, current } => {
                        // The send outlived the lease and another worker took over. With an
                        // idempotent provider its resend is deduplicated; otherwise the ledger
                        // may now say dead/ambiguous for a delivered message: say so loudly,
                        // with the receipt, for reconciliation.
                        m.delivered_after_takeover += 1;
                        tracing::error!(
                            delivery_key = %msg.delivery_key,
                            %refused,
                            ledger_status = ?current.as_ref().map(|c| c.status()),
                            "delivered after the lease was taken over"
                        );
                    }
                }
                Ok(Action::Ack)
            }
            Next::Retry { at, class, .. } => {
                if class == OutcomeClass::Throttled {
                    m.deferred_provider += 1;
                    // The gate closes until the provider said (its Retry-After), not until this
                    // delivery's jittered retry: deferred workers add their own jitter.
                    let until = match &outcome_retry_after {
                        Some(ra) => *ra,
                        None => at,
                    };
                    self.close_gate(partition, until).await;
                } else {
                    m.retried += 1;
                }
                let change = Change::Defer {
                    token,
                    next_eligible_at: at,
                    class,
                    error,
                };
                match transition(ledger, Some(record), change, &ctx).await? {
                    Written::Applied(deferred) => {
                        log_transition(
                            msg,
                            deferred.attempt_count(),
                            class_name(class),
                            "retry",
                            at.since(now),
                        );
                        self.hold(inc, msg, at, now, m).await
                    }
                    // Our lease was taken over: the new holder's message carries on.
                    Written::Refused { .. } => Ok(Action::Ack),
                }
            }
            Next::Dead(reason) => {
                let change = Change::Die {
                    token: Some(token),
                    reason,
                    spends_attempt: class != OutcomeClass::Throttled,
                    error,
                };
                if let Written::Applied(dead) =
                    transition(ledger, Some(record), change, &ctx).await?
                {
                    m.dead(reason);
                    log_transition(
                        msg,
                        dead.attempt_count(),
                        class_name(class),
                        "dead",
                        Duration::ZERO,
                    );
                    self.copy_to_dlq(inc, &dead, reason, now).await?;
                }
                Ok(Action::Ack)
            }
            Next::Expire => {
                // The next chance lands after fresh_until: defer (fenced), then expire.
                let change = Change::Defer {
                    token,
                    next_eligible_at: reminder.fresh_until,
                    class,
                    error,
                };
                if let Written::Applied(deferred) =
                    transition(ledger, Some(record), change, &ctx).await?
                {
                    if let Written::Applied(_) =
                        transition(ledger, Some(deferred), Change::Expire, &ctx).await?
                    {
                        m.expired += 1;
                        log_transition(msg, spent.attempts, "stale", "ack", Duration::ZERO);
                    }
                }
                Ok(Action::Ack)
            }
        }
    }

    /// Keep the message until `at`: on its visibility when that fits and the receive budget
    /// has room, otherwise as a fresh delayed copy with `not_before` (DESIGN §5).
    async fn hold(
        &self,
        inc: &Incoming,
        msg: &DeliveryMessage,
        at: Timestamp,
        now: Timestamp,
        m: &mut Metrics,
    ) -> Result<Action, PortError> {
        let near_limit =
            inc.receive_count + self.cfg.reenqueue_margin >= self.cfg.max_receive_count;
        let wait = wait_until(now, at);
        if let (Wait::Visibility { secs }, false) = (wait, near_limit) {
            self.ports
                .queue()
                .change_visibility(inc.channel, &inc.receipt_handle, secs)
                .await?;
            return Ok(Action::Hold { secs });
        }
        let delay_secs = match wait {
            Wait::Visibility { secs } => secs.min(MAX_DELAY_SECS as u32),
            Wait::Reenqueue { delay_secs, .. } => delay_secs,
        };
        let mut copy = msg.clone();
        copy.not_before = Some(at);
        let entry = OutgoingMessage {
            entry_id: "0".into(),
            body: copy.encode(),
            delay_secs,
        };
        let failed = self.ports.queue().send_batch(inc.channel, &[entry]).await?;
        if let Some(f) = failed.first() {
            return Err(PortError::Unavailable {
                op: "consumer.reenqueue",
                message: format!("copy not accepted: {}", f.code),
            });
        }
        m.reenqueued += 1;
        Ok(Action::Reenqueued)
    }

    async fn dead_schema(
        &self,
        inc: &Incoming,
        class: &'static str,
        now: Timestamp,
        m: &mut Metrics,
    ) -> Result<Action, PortError> {
        let evidence = Evidence {
            attempts: 0,
            first_seen_at: None,
            dead_at: now,
            last_error: Some(class.into()),
            policy_version: Some(self.cfg.policy.version.clone()),
            source_queue: self.source_queue(inc),
        };
        let letter = DeadLetter::new(DeadReason::Schema, evidence);
        self.ports
            .dead_letters()
            .dead_letter(inc.channel, &inc.body, &letter)
            .await?;
        m.dead(DeadReason::Schema);
        tracing::warn!(message_id = %inc.message_id, error = class, next_action = "dead", "undecodable message dead-lettered");
        Ok(Action::Ack)
    }

    async fn unknown_reminder(
        &self,
        inc: &Incoming,
        msg: &DeliveryMessage,
        now: Timestamp,
        m: &mut Metrics,
    ) -> Result<Action, PortError> {
        let ctx = Ctx {
            key: msg.delivery_key.clone(),
            now,
            expires_at: msg
                .fresh_until
                .plus(self.cfg.retention)
                .as_epoch_seconds_ceil(),
        };
        let change = Change::Die {
            token: None,
            reason: DeadReason::UnknownReminder,
            spends_attempt: false,
            error: Some("reminder_not_found".into()),
        };
        // A delivery already in the ledger keeps its state; the evidence goes to the DLQ anyway.
        let written = transition(self.ports.ledger(), None, change, &ctx).await?;
        let evidence = Evidence {
            attempts: 0,
            first_seen_at: match &written {
                Written::Applied(r) => Some(r.first_seen_at()),
                Written::Refused { current, .. } => current.as_ref().map(|r| r.first_seen_at()),
            },
            dead_at: now,
            last_error: Some("reminder_not_found".into()),
            policy_version: Some(self.cfg.policy.version.clone()),
            source_queue: self.source_queue(inc),
        };
        let letter = DeadLetter::new(DeadReason::UnknownReminder, evidence);
        self.ports
            .dead_letters()
            .dead_letter(inc.channel, &inc.body, &letter)
            .await?;
        m.dead(DeadReason::UnknownReminder);
        log_transition(msg, 0, "unknown_reminder", "dead", Duration::ZERO);
        Ok(Action::Ack)
    }

    async fn copy_to_dlq(
        &self,
        inc: &Incoming,
        record: &DeliveryRecord,
        reason: DeadReason,
        now: Timestamp,
    ) -> Result<(), PortError> {
        let evidence = Evidence {
            attempts: record.attempt_count(),
            first_seen_at: Some(record.first_seen_at()),
            dead_at: now,
            last_error: record.last_error().map(str::to_owned),
            policy_version: record.policy().map(|p| p.version.clone()),
            source_queue: self.source_queue(inc),
        };
        self.ports
            .dead_letters()
            .dead_letter(inc.channel, &inc.body, &DeadLetter::new(reason, evidence))
            .await
    }

    fn source_queue(&self, inc: &Incoming) -> String {
        super::event::queue_name(self.queue_urls.get(inc.channel)).to_owned()
    }

    async fn gate_closed_until(
        &self,
        partition: &GatePartition,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, PortError> {
        let cached = super::lock(&self.gates).get(partition).copied();
        let until = match cached {
            Some((read_at, until)) if now.since(read_at) < self.cfg.gate_cache => until,
            _ => {
                let until = self.ports.gate().throttled_until(partition).await?;
                super::lock(&self.gates).insert(partition.clone(), (now, until));
                until
            }
        };
        Ok(until.filter(|u| *u > now))
    }

    /// Close the provider partition; a failure here only costs other workers a 429 each.
    async fn close_gate(&self, partition: &GatePartition, until: Timestamp) {
        let now = self.ports.clock().now();
        super::lock(&self.gates).insert(partition.clone(), (now, Some(until)));
        if let Err(e) = self.ports.gate().throttle(partition, until).await {
            tracing::warn!(error = %e, partition = %partition.item_key(), "could not close the provider gate");
        }
    }
}

fn class_name(class: OutcomeClass) -> &'static str {
    match class {
        OutcomeClass::Delivered => "delivered",
        OutcomeClass::Throttled => "throttled",
        OutcomeClass::Transient => "transient",
        OutcomeClass::Permanent => "permanent",
        OutcomeClass::Ambiguous => "ambiguous",
        OutcomeClass::Stale => "stale",
        OutcomeClass::Cancelled => "cancelled",
    }
}

/// The one structured line per transition (DESIGN §8). No recipient, ever.
fn log_transition(msg: &DeliveryMessage, attempt: u32, outcome: &str, next: &str, delay: Duration) {
    tracing::info!(
        delivery_key = %msg.delivery_key,
        attempt,
        outcome_class = outcome,
        next_action = next,
        delay_secs = delay.as_secs(),
        "transition"
    );
}
