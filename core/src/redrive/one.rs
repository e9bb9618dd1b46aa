//! One matching DLQ message, redriven: freshness (left stale unless the operator extends it),
//! the ledger's `dead → ready` with its audit entry (an already finished delivery is removed
//! from the DLQ and skipped), the re-enqueue with the same delivery key and a `redrive`
//! marker, and only then the delete from the DLQ.

use std::ops::ControlFlow::{self, Break, Continue};
use std::time::Duration;

use super::{One, Redriver};
use crate::clock::{Clock, Timestamp};
use crate::delivery::{transition, Cancelled, Written};
use crate::domain::{DeliveryMessage, RedriveMarker, ReminderStatus};
use crate::ledger::{Change, Ctx, Origin, RedriveAudit, Refused, Status, Why};
use crate::ports::{
    DeadLetterMessage, DeadLetters, DeliveryQueue, Ledger, Marked, OutgoingMessage, PortError,
    Ports, ReminderStore,
};
use crate::redrive::RedriveRequest;

type Step<T> = Result<ControlFlow<One, T>, PortError>;

impl<P: Ports> Redriver<P>
where
    P::Reminders: crate::ports::SeriesStore,
{
    pub(super) async fn redrive_one(
        &self,
        req: &RedriveRequest,
        batch_id: &str,
        dm: &DeadLetterMessage,
    ) -> One {
        match self.try_redrive(req, batch_id, dm).await {
            Ok(Continue(())) => One::Moved,
            Ok(Break(one)) => one,
            Err(e) => {
                tracing::warn!(error = %e, message_id = %dm.message.message_id, "redrive of one message failed; left in the DLQ");
                One::Failed
            }
        }
    }

    async fn try_redrive(
        &self,
        req: &RedriveRequest,
        batch_id: &str,
        dm: &DeadLetterMessage,
    ) -> Step<()> {
        let Ok(msg) = DeliveryMessage::decode(&dm.message.body) else {
            tracing::warn!(message_id = %dm.message.message_id, "undecodable message cannot be redriven");
            return Ok(Break(One::Failed));
        };
        if let Break(one) = self.skip_earlier_death(req, &msg, dm).await? {
            return Ok(Break(one));
        }
        let now = self.ports.clock().now();
        let fresh_until = match self.fresh_until(req, &msg, now, dm).await? {
            Continue(at) => at,
            Break(one) => return Ok(Break(one)),
        };
        if let Break(one) = self
            .make_ready(req, batch_id, &msg, fresh_until, now, dm)
            .await?
        {
            return Ok(Break(one));
        }
        let key = msg.delivery_key.clone();
        self.reenqueue(req, batch_id, msg, now).await?;
        // Only after the re-enqueue succeeded. A crash here leaves a duplicate in the DLQ,
        // which the ledger makes harmless.
        self.ports
            .dead_letters()
            .delete_dead(req.channel, &dm.message.receipt_handle)
            .await?;
        tracing::info!(delivery_key = %key, batch_id, operator = %req.operator, "redriven");
        Ok(Continue(()))
    }

    /// A copy of an earlier death, left by a run that stopped between its re-enqueue and its
    /// delete: the delivery died again since (the consumer copies that death on its own).
    /// Redriving this one would redrive the later death under the earlier one's filters: it is
    /// removed and counted as skipped.
    async fn skip_earlier_death(
        &self,
        req: &RedriveRequest,
        msg: &DeliveryMessage,
        dm: &DeadLetterMessage,
    ) -> Step<()> {
        let Some(copy_dead_at) = dm.letter.evidence.as_ref().map(|e| e.dead_at) else {
            return Ok(Continue(()));
        };
        let current = self.ports.ledger().get(&msg.delivery_key).await?;
        let died_since = current
            .and_then(|r| r.dead_at())
            .is_some_and(|at| at > copy_dead_at);
        if !died_since {
            return Ok(Continue(()));
        }
        self.ports
            .dead_letters()
            .delete_dead(req.channel, &dm.message.receipt_handle)
            .await?;
        tracing::info!(delivery_key = %msg.delivery_key, "copy of an earlier death; removed");
        Ok(Break(One::Skipped))
    }

    /// The reminder's freshness: stale is left alone unless the operator extends it.
    async fn fresh_until(
        &self,
        req: &RedriveRequest,
        msg: &DeliveryMessage,
        now: Timestamp,
        dm: &DeadLetterMessage,
    ) -> Step<Timestamp> {
        let Some(reminder) = self.ports.reminders().get(&msg.reminder_id).await? else {
            tracing::warn!(delivery_key = %msg.delivery_key, "reminder is gone; nothing to redrive");
            return Ok(Break(One::Failed));
        };
        // The ledger orders a cancel against a redrive (`dead → cancelled`); a reminder marked
        // cancelled is not redriven either, whatever its ledger item says.
        if reminder.status == ReminderStatus::Cancelled {
            return self.cancelled(req, msg, &reminder, now, dm).await;
        }
        // An occurrence its series no longer makes (an acknowledged edit moved it, or the
        // series was cancelled) is ended for good, even when the edit left it alone (stale, or
        // settled): cancelled now, so that it reads cancelled, and never redriven.
        if super::series::unmade(self.ports.reminders(), &reminder).await? {
            let store = self.ports.reminders();
            let retention = self.cfg.retention;
            crate::reminder_writes::cancel(
                store,
                self.ports.ledger(),
                &msg.reminder_id,
                now,
                retention,
            )
            .await
            .map_err(super::series::port_error)?;
            tracing::warn!(delivery_key = %msg.delivery_key, "its series no longer makes this occurrence (edited or cancelled); cancelled, not redriven");
            return self.cancelled(req, msg, &reminder, now, dm).await;
        }
        // Fresh by every clock within the margin: redriven as it is. Any later, the consumer
        // could only hold it until it is surely stale, so it is stale here (extended if asked).
        use crate::domain::reminder::{freshness, Freshness};
        if freshness(reminder.fresh_until, now) == Freshness::Fresh {
            return Ok(Continue(reminder.fresh_until));
        }
        let Some(extra) = req.extend_freshness_secs else {
            return Ok(Break(One::Stale));
        };
        // A series' occurrence gone stale is not extended (unless edited on its own): a series
        // edit since may no longer make it, and it leaves stale occurrences as they are, so a
        // revived one would go beside the series' later times (found by chaos seed 288).
        let occurrence = crate::domain::series::occurrence_of(&msg.reminder_id).is_some();
        if occurrence && !reminder.detached {
            return Ok(Break(One::Stale));
        }
        // Two attributes, conditional on the version read: never a whole-item rewrite.
        let fresh_until = now.plus(Duration::from_secs(extra));
        let expires_at = self.cfg.retention.expires_at(fresh_until);
        let store = self.ports.reminders();
        let version = reminder.payload_version;
        match store
            .extend_freshness(&msg.reminder_id, version, fresh_until, expires_at)
            .await?
        {
            Marked::Marked => Ok(Continue(fresh_until)),
            // Edited, cancelled or gone meanwhile: the next run looks again.
            Marked::Changed | Marked::Missing => Ok(Break(One::Stale)),
        }
    }

    /// The reminder was cancelled while this delivery was dead (or in flight, and died
    /// since): the ledger says so too (`dead → cancelled`), and only then is the moot copy
    /// removed. A delivery the ledger will not cancel keeps its copy.
    async fn cancelled(
        &self,
        req: &RedriveRequest,
        msg: &DeliveryMessage,
        reminder: &crate::domain::Reminder,
        now: Timestamp,
        dm: &DeadLetterMessage,
    ) -> Step<Timestamp> {
        let ctx = Ctx {
            key: msg.delivery_key.clone(),
            now,
            expires_at: self.cfg.retention.expires_at(reminder.fresh_until),
            origin: Some(Origin::of(msg)),
        };
        let answer = crate::delivery::cancel(self.ports.ledger(), &ctx).await?;
        let settled = matches!(
            answer,
            Cancelled::Cancelled
                | Cancelled::AlreadyDelivered
                | Cancelled::AlreadyFinal(Status::Cancelled | Status::Expired)
        );
        if !settled {
            tracing::warn!(delivery_key = %msg.delivery_key, ?answer, "reminder cancelled, delivery not; left in the DLQ");
            return Ok(Break(One::Refused));
        }
        self.ports
            .dead_letters()
            .delete_dead(req.channel, &dm.message.receipt_handle)
            .await?;
        tracing::info!(delivery_key = %msg.delivery_key, "reminder cancelled; not redriven, removed");
        Ok(Break(One::Skipped))
    }

    /// `dead → ready` on the ledger, with the audit entry. A finished delivery is removed
    /// from the DLQ and skipped, never resent.
    async fn make_ready(
        &self,
        req: &RedriveRequest,
        batch_id: &str,
        msg: &DeliveryMessage,
        fresh_until: Timestamp,
        now: Timestamp,
        dm: &DeadLetterMessage,
    ) -> Step<()> {
        let ctx = Ctx {
            key: msg.delivery_key.clone(),
            now,
            expires_at: self.cfg.retention.expires_at(fresh_until),
            origin: Some(Origin::of(msg)),
        };
        let audit = RedriveAudit {
            batch_id: batch_id.to_owned(),
            operator: req.operator.clone(),
            note: req.note.clone(),
        };
        let reasons = req.reasons.clone();
        let change = Change::Redrive { audit, reasons };
        match transition(self.ports.ledger(), None, change, &ctx).await? {
            Written::Refused {
                refused:
                    Refused {
                        why: Why::ReasonNotSelected(held),
                        ..
                    },
                ..
            } => {
                tracing::warn!(delivery_key = %msg.delivery_key, ledger_reason = %held, "the ledger holds it dead for a reason not selected; left in the DLQ");
                Ok(Break(One::Refused))
            }
            Written::Refused {
                refused:
                    Refused {
                        why: Why::FellBack(to),
                        ..
                    },
                ..
            } => {
                // Its fallback channel took the reminder over: a resend would reach the
                // person twice. Done with: out of the DLQ, counted as skipped.
                tracing::warn!(delivery_key = %msg.delivery_key, fallback_to = %to, "fell back to another channel; not redriven");
                self.ports
                    .dead_letters()
                    .delete_dead(req.channel, &dm.message.receipt_handle)
                    .await?;
                Ok(Break(One::Skipped))
            }
            // A newer writer's state: not redriven by this version, and the copy stays in
            // the DLQ (counted `refused`) for a redrive by a version that knows it.
            Written::Refused {
                refused:
                    Refused {
                        why: Why::NewerStatus,
                        from,
                        ..
                    },
                ..
            } => {
                tracing::warn!(delivery_key = %msg.delivery_key, status = from.as_str(), "ledger status unknown to this version; not redriven, left in the DLQ");
                Ok(Break(One::Refused))
            }
            Written::Refused {
                current: Some(r), ..
            } if r.status().is_terminal() => {
                self.ports
                    .dead_letters()
                    .delete_dead(req.channel, &dm.message.receipt_handle)
                    .await?;
                Ok(Break(One::Skipped))
            }
            // Applied; or no item (still `scheduled`); or ready (a crashed run), sending or
            // deferred: the ledger guards the resend.
            _ => Ok(Continue(())),
        }
    }

    /// The same body and delivery key back on the channel's queue, with a `redrive` marker.
    async fn reenqueue(
        &self,
        req: &RedriveRequest,
        batch_id: &str,
        msg: DeliveryMessage,
        now: Timestamp,
    ) -> Result<(), PortError> {
        let mut copy = msg;
        copy.not_before = None;
        copy.redrive = Some(RedriveMarker {
            batch_id: batch_id.to_owned(),
            operator: req.operator.clone(),
            at: now,
        });
        let entry = OutgoingMessage {
            entry_id: "0".into(),
            body: copy.encode(),
            delay_secs: 0,
        };
        let failed = self.ports.queue().send_batch(req.channel, &[entry]).await?;
        if let Some(f) = failed.first() {
            return Err(PortError::Unavailable {
                op: "redrive.enqueue",
                message: f.code.clone(),
            });
        }
        Ok(())
    }
}
