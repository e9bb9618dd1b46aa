//! Fallback channels (DESIGN §12). With a fallback order in the subscriber's preferences, a
//! reminder's channels behind the first one it lists wait in standby. When a channel's
//! delivery dies for a reason that means it cannot reach the person (`rejected`, `opted_out`,
//! `suppressed`, `expired_quiet_hours`), the next listed channel in the order gets a delivery
//! of its own, keyed by its own (reminder, subscriber, channel), so its ledger item sends it at
//! most once however many messages ask.
//!
//! The death is written first, naming the channel it hands on to (`fallback_to`); then a
//! message for that channel (`fallback_from`) is enqueued, best effort, to send it at once.
//! Nothing rests on that message: the standby channel's own message (the scheduler enqueues
//! one per listed channel) is held, not acknowledged, until the ledger item of the channel
//! ahead of it settles, and then reads its turn from that item ([`crate::delivery::standby`]).
//! A crash between the death and the enqueue, a failed enqueue, or a change of order mid-flight
//! therefore loses nothing.

use std::ops::ControlFlow;
use std::time::Duration;

use super::{Delivery, Record, Step};
use crate::consumer::Action;
use crate::delivery::standby::{turn, Turn};
use crate::domain::{Channel, DeadReason, DeliveryMessage, Preferences};
use crate::ports::{DeliveryQueue, OutgoingMessage, PortError, Ports, ReminderStore};

/// A standby channel looks at the chain again this long (times its receives, up to 20) after
/// the channel ahead could next change.
pub const STANDBY_RECHECK: Duration = Duration::from_secs(30);

impl<P: Ports> Record<'_, P> {
    /// Before the claim: a channel in standby behind another that the reminder lists is held
    /// until that one settles, then sent (its turn came) or acknowledged (it did not), by the
    /// ledger item of the channel ahead. A fallback's own message goes straight on.
    pub(super) async fn standby(&mut self, mut d: Delivery) -> Step<Delivery> {
        if d.msg.fallback_from.is_some() || d.reminder.recipients.len() < 2 {
            return Ok(ControlFlow::Continue(d));
        }
        let store = self.consumer.ports.reminders();
        let prefs = match store.preferences(&d.msg.subscriber_id).await {
            Ok(Some(prefs)) => prefs,
            Ok(None) => return Ok(ControlFlow::Continue(d)),
            Err(PortError::Corrupt { op, message }) => {
                // Nothing claimed yet: dead with its reason and DLQ copy, as an unreadable
                // reminder is.
                let why = format!("unreadable {op}: {message}");
                let now = self.now();
                let action = self
                    .dead_unsendable(&d.msg, DeadReason::InvalidReminder, why, now)
                    .await?;
                return Ok(ControlFlow::Break(action));
            }
            Err(e) => return Err(e),
        };
        let channel = self.inc.channel;
        let listed = |c: Channel| d.reminder.recipients.contains_key(&c);
        let now = self.now();
        let ledger = self.consumer.ports.ledger();
        let (reminder, subscriber) = (&d.msg.reminder_id, &d.msg.subscriber_id);
        let Some(turn) = turn(ledger, &prefs, reminder, subscriber, listed, channel, now).await?
        else {
            return Ok(ControlFlow::Continue(d));
        };
        let log = |what: &str| {
            tracing::info!(
                delivery_key = %d.msg.delivery_key,
                reminder_id = %d.msg.reminder_id,
                channel = %channel,
                turn = ?turn,
                "standby: {what}"
            );
        };
        match turn {
            Turn::TakeOver { from } => {
                log("the channel ahead died: sent as its fallback");
                d.msg.fallback_from = Some(from);
                Ok(ControlFlow::Continue(d))
            }
            Turn::NotNeeded { .. } => {
                log("the chain ended without handing on: not sent");
                self.m.standby += 1;
                Ok(ControlFlow::Break(Action::Ack))
            }
            Turn::Wait { after, .. } => {
                log("waiting for the channel ahead");
                self.m.standby_held += 1;
                // Looked at again a little later each time it comes back (at most every ten
                // minutes): a long wait ahead costs few receives.
                let rounds = self.inc.receive_count.clamp(1, 20);
                let until = after.max(now).plus(STANDBY_RECHECK * rounds);
                Ok(ControlFlow::Break(self.hold(&d.msg, until, now).await?))
            }
        }
    }

    /// The channel a death for `reason` hands the reminder on to, if the preferences and the
    /// reminder's channels give one (recorded with the death as `fallback_to`).
    pub(super) fn fallback_for(
        &self,
        d: &Delivery,
        reason: DeadReason,
        prefs: Option<&Preferences>,
    ) -> Option<Channel> {
        if !reason.falls_back() {
            return None;
        }
        let listed = |c: Channel| d.reminder.recipients.contains_key(&c);
        prefs?.fallback_for(self.inc.channel, listed)
    }

    /// After the death naming `next` was written: its message, to send it now. Best effort:
    /// the standby channel's own message finds the death if this one never arrives.
    pub(super) async fn enqueue_fallback(&mut self, d: &Delivery, next: Channel) {
        let channel = self.inc.channel;
        let mut msg = DeliveryMessage::new(
            d.reminder.reminder_id.clone(),
            d.reminder.subscriber_id.clone(),
            next,
            d.reminder.payload_version,
            d.reminder.due_at,
            d.reminder.fresh_until,
        );
        msg.fallback_from = Some(channel);
        let out = OutgoingMessage {
            entry_id: "0".into(),
            body: msg.encode(),
            delay_secs: 0,
        };
        let sent = self.consumer.ports.queue().send_batch(next, &[out]).await;
        match sent {
            Ok(failed) if failed.is_empty() => {
                tracing::info!(
                    delivery_key = %d.msg.delivery_key,
                    reminder_id = %d.msg.reminder_id,
                    from = %channel,
                    to = %next,
                    fallback_key = %msg.delivery_key,
                    "fell back to the next channel"
                );
            }
            Ok(failed) => tracing::warn!(
                delivery_key = %d.msg.delivery_key,
                to = %next,
                code = failed.first().map(|f| f.code.as_str()).unwrap_or_default(),
                "fallback message refused: the standby channel's own message will send it"
            ),
            Err(e) => tracing::warn!(
                delivery_key = %d.msg.delivery_key,
                to = %next,
                error = %e,
                "fallback message not enqueued: the standby channel's own message will send it"
            ),
        }
    }
}
