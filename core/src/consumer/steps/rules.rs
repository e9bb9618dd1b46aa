//! The recipient's rules (docs/design.md, "Recipient rules"), decided after the claim and before
//! the send, so a preference written before the claim is honoured as a cancel is (the claim orders
//! them): an opted-out channel is never sent (`opted_out`), a delivery inside its channel's quiet
//! hours is held until they end while it stays fresh (deferred on the ledger, nothing spent),
//! and one that would be stale by then ends `expired_quiet_hours`. No provider call, no
//! attempt spent, no DLQ copy: these are the recipient's choices, not failures.
//!
//! Read requests: a sole channel's message (the scheduler marks it, with the address's
//! keyed hash) is claimed first and costs one, a strongly consistent `BatchGetItem` of the
//! reminder, the preferences and the suppression after the claim ([`super::direct`]). Any
//! other message costs two: the reminder (`GetItem`, at intake) and this step's batch of the
//! preferences and the suppression (both counted on the emulator by
//! `tests/consumer/emulator_reads.rs`). Reading the rules before the claim would miss an
//! opt-out landing between the read and the claim; a `TransactWriteItems` claim checking
//! them costs about six write units and conflicts with the recipient's own writes.
//!
//! Any change here must keep `tests/consumer/before_claim.rs`: an opt-out, a suppression or a
//! cancel written right before the claim wins.

use std::ops::ControlFlow;
use std::time::Duration;

use super::{log_transition, Action, Delivery, InFlight, Lease, Step};
use crate::clock::Timestamp;
use crate::delivery::Written;
use crate::domain::preferences::Decision;
use crate::domain::{AddressHash, DeadReason, Suppression, SuppressionSource};
use crate::ledger::Change;
use crate::ports::{Ports, ReminderStore};

impl<P: Ports> InFlight<'_, P> {
    /// `Continue` to send; otherwise the record ends held or dead, by the preferences and
    /// the suppressions: an opt-out first (the recipient's word), then a dead address (no
    /// point holding what can never go), then quiet hours.
    pub(super) async fn recipient_rules(
        &mut self,
        d: &Delivery,
        lease: Lease,
        address: Option<AddressHash>,
    ) -> Step<Lease> {
        // One read for both (a batch on DynamoDB): the preferences, and the suppression of
        // this address when suppressions are kept. Nothing is sent yet: a failed read gives
        // the lease back, never leaving a claim for the ambiguous rule to judge.
        let store = self.consumer.ports.reminders();
        let read = store
            .recipient_rules(&d.msg.subscriber_id, address.as_ref())
            .await;
        match read {
            Ok(read) => self.apply_rules(d, lease, read).await,
            Err(e) => self
                .unsent_after_error(d, lease, e)
                .await
                .map(ControlFlow::Break),
        }
    }

    /// [`InFlight::recipient_rules`] on what was read after the claim (by that step, or by the
    /// one-read path's batch).
    pub(super) async fn apply_rules(
        &mut self,
        d: &Delivery,
        mut lease: Lease,
        (prefs, suppressed): (
            Option<crate::domain::Preferences>,
            Option<crate::domain::Suppression>,
        ),
    ) -> Step<Lease> {
        lease.prefs = prefs.clone();
        let prefs = prefs.as_ref();
        let now = self.now();
        let decision = prefs.map_or(Decision::Send, |p| {
            p.decide(self.inc.channel, now, d.reminder.fresh_until)
        });
        let choice = match (decision, suppressed) {
            (Decision::OptedOut, _) => Some((
                DeadReason::OptedOut,
                "the subscriber opted out of this channel".to_owned(),
            )),
            // The hash and the source, never the address (not even masked) on the ledger.
            (_, Some(found)) => Some((
                DeadReason::Suppressed,
                format!(
                    "address {} suppressed by {} at {}",
                    found.address_hash,
                    found.source,
                    found.at.to_rfc3339()
                ),
            )),
            (Decision::QuietUntilStale, None) => Some((
                DeadReason::ExpiredQuietHours,
                "inside quiet hours, and stale before they end".to_owned(),
            )),
            (Decision::Send | Decision::Hold { .. }, None) => None,
        };
        // Nothing is sent on any of these paths: a failed write gives the lease back too.
        let kept = lease.clone();
        let done = match (choice, decision) {
            (Some((reason, why)), _) => self.recipients_choice(d, lease, reason, &why, prefs).await,
            (None, Decision::Hold { until }) => self.quiet_hours(d, lease, until, now).await,
            (None, _) => return Ok(ControlFlow::Continue(lease)),
        };
        match done {
            Ok(action) => Ok(ControlFlow::Break(action)),
            Err(e) => self
                .unsent_after_error(d, kept, e)
                .await
                .map(ControlFlow::Break),
        }
    }

    /// The last look right before a send that came after a further write (the breaker's
    /// probe): still fresh, and outside the quiet hours of the preferences read after the
    /// claim. No storage read: the preferences ride on the lease.
    pub(super) async fn last_look(&mut self, d: &Delivery, lease: Lease) -> Step<Lease> {
        let lease = match self.still_fresh(d, lease).await? {
            ControlFlow::Continue(lease) => lease,
            ControlFlow::Break(action) => return Ok(ControlFlow::Break(action)),
        };
        let now = self.now();
        let decision = lease.prefs.as_ref().map_or(Decision::Send, |p| {
            p.decide(self.inc.channel, now, d.reminder.fresh_until)
        });
        let prefs = lease.prefs.clone();
        let action = match decision {
            Decision::Send => return Ok(ControlFlow::Continue(lease)),
            Decision::Hold { until } => self.quiet_hours(d, lease, until, now).await?,
            Decision::OptedOut => {
                let why = "the subscriber opted out of this channel";
                let reason = DeadReason::OptedOut;
                self.recipients_choice(d, lease, reason, why, prefs.as_ref())
                    .await?
            }
            Decision::QuietUntilStale => {
                let why = "inside quiet hours, and stale before they end";
                let reason = DeadReason::ExpiredQuietHours;
                self.recipients_choice(d, lease, reason, why, prefs.as_ref())
                    .await?
            }
        };
        Ok(ControlFlow::Break(action))
    }

    /// A storage call before the send failed, with nothing sent: the lease is given back
    /// (nothing spent), so the retry is a fresh claim, never a takeover for the ambiguous rule
    /// to judge. An item that cannot be read (unreadable preferences or suppression) ends the
    /// delivery dead `invalid_reminder`, naming it, with its DLQ copy: fix the preferences or
    /// lift the suppression, then redrive. Other errors retry the record.
    pub(super) async fn unsent_after_error(
        &mut self,
        d: &Delivery,
        lease: Lease,
        error: crate::ports::PortError,
    ) -> Result<Action, crate::ports::PortError> {
        let change = Change::Release {
            token: lease.token,
            why: "a storage call before the send failed",
        };
        match self.under_lease(d, lease.record, change).await {
            Ok(Written::Applied(_)) => {}
            // Our own write applied before its answer was lost (or another worker took the
            // lease): the next claim sees the ledger as it is. The error still counts.
            Ok(Written::Refused { .. }) => return Err(error),
            // The ledger fails too: the lease lapses and a takeover decides.
            Err(_) => return Err(error),
        }
        match error {
            crate::ports::PortError::Corrupt { op, message } => {
                let why = format!("unreadable {op}: {message}");
                let now = self.now();
                self.dead_unsendable(
                    &d.msg,
                    DeadReason::InvalidReminder,
                    why,
                    d.reminder.fresh_until,
                    now,
                )
                .await
            }
            other => Err(other),
        }
    }

    /// The keyed hash of this delivery's address, when suppressions are kept.
    pub(super) async fn address_hash(
        &self,
        d: &Delivery,
    ) -> Result<Option<AddressHash>, crate::ports::PortError> {
        let Some(key) = self.consumer.suppression_key().await? else {
            return Ok(None);
        };
        Ok(Some(AddressHash::of(&key, &d.request.recipient)))
    }

    /// The provider declared the address dead: suppress it, so later deliveries to it end
    /// `suppressed` without a call. Best effort, before the outcome is written: a failed
    /// write is logged and this delivery's own outcome still lands (the next answer from the
    /// provider will declare it again).
    pub(super) async fn suppress(&mut self, d: &Delivery, source: SuppressionSource) {
        let key = match self.consumer.suppression_key().await {
            Ok(Some(key)) => key,
            Ok(None) => return,
            Err(e) => {
                tracing::error!(delivery_key = %d.msg.delivery_key, error = %e, "address declared dead, but the suppression key is unavailable");
                return;
            }
        };
        let sup = Suppression::record(&key, &d.request.recipient, source, self.now());
        let store = self.consumer.ports.reminders();
        match store.put_suppression(&sup).await {
            Ok(()) => {
                self.m.suppressions_recorded += 1;
                tracing::warn!(
                    delivery_key = %d.msg.delivery_key,
                    channel = %sup.channel,
                    address = %sup.masked,
                    address_hash = %sup.address_hash,
                    source = %sup.source,
                    "address suppressed"
                );
            }
            Err(e) => tracing::error!(
                delivery_key = %d.msg.delivery_key,
                address_hash = %sup.address_hash,
                error = %e,
                "address declared dead, but its suppression could not be written"
            ),
        }
    }

    /// Deferred (fenced, nothing spent) until the quiet hours end; the message waits as long.
    async fn quiet_hours(
        &mut self,
        d: &Delivery,
        lease: Lease,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Action, crate::ports::PortError> {
        let change = Change::Hold {
            token: lease.token,
            next_eligible_at: until,
            error: Some(format!(
                "{}{}",
                crate::ledger::QUIET_HOURS_ERROR,
                until.to_rfc3339()
            )),
            quiet_hours: true,
            maybe_sent: false,
        };
        match self.under_lease(d, lease.record, change).await? {
            Written::Applied(held) => {
                self.m.held_quiet_hours += 1;
                log_transition(
                    &d.msg,
                    held.attempt_count(),
                    "quiet_hours",
                    "hold",
                    until.since(now),
                );
                self.hold(&d.msg, until, now).await
            }
            // Our lease was taken over: the new holder's handle decides.
            Written::Refused { .. } => Ok(Action::Leave),
        }
    }

    /// Dead for `reason` (fenced, no attempt spent), with no DLQ copy.
    async fn recipients_choice(
        &mut self,
        d: &Delivery,
        lease: Lease,
        reason: DeadReason,
        why: &str,
        prefs: Option<&crate::domain::Preferences>,
    ) -> Result<Action, crate::ports::PortError> {
        let fallback_to = self.fallback_for(d, &lease.record, reason, false, prefs);
        let change = Change::Die {
            token: Some(lease.token),
            reason,
            spends_attempt: false,
            error: Some(why.to_owned()),
            fallback_to,
            maybe_sent: false,
        };
        match self.under_lease(d, lease.record, change).await? {
            Written::Applied(dead) => {
                self.m.dead(reason);
                log_transition(
                    &d.msg,
                    dead.attempt_count(),
                    reason.as_str(),
                    "dead",
                    Duration::ZERO,
                );
                if let Some(next) = fallback_to {
                    self.m.fallbacks += 1;
                    self.enqueue_fallback(&d.msg, next).await?;
                }
                Ok(Action::Ack)
            }
            Written::Refused { .. } => Ok(Action::Leave),
        }
    }
}
