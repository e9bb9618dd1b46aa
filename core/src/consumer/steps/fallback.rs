//! Fallback channels (docs/design.md, "Fallback chain"). With a fallback order in the subscriber's
//! preferences, a reminder's channels behind the first one it lists wait in standby. When a
//! channel's delivery dies for a reason that means it cannot reach the person (`rejected`,
//! `opted_out`, `suppressed`, `expired_quiet_hours`, `country_not_allowed`), the next listed channel in the order gets a
//! delivery of its own, keyed by its own (reminder, subscriber, channel), so its ledger item sends
//! it at most once however many messages ask.
//!
//! The death is written first, naming the channel it hands on to (`fallback_to`); then a
//! message for that channel (`fallback_from`) is enqueued, best effort, to send it at once.
//! Nothing rests on that message: the standby channel's own message (the scheduler enqueues
//! one per listed channel) is held, not acknowledged, until the ledger item of the channel
//! ahead of it settles, and then reads its turn from that item ([`crate::delivery::standby`]).
//! A crash between the death and the enqueue, a failed enqueue, or a change of order mid-flight
//! therefore loses nothing.

use super::{Delivery, InFlight};
use crate::delivery::{transition, Written};
use crate::domain::{Channel, DeadReason, DeliveryKey, DeliveryMessage, Preferences};
use crate::ledger::{Change, DeliveryRecord, Status};
use crate::ports::{DeliveryQueue, Ledger, OutgoingMessage, PortError, Ports, ReminderStore};

impl<P: Ports> InFlight<'_, P> {
    /// A dead delivery that names its fallback: make sure the fallback's delivery exists or
    /// its message is on its way (a crash after the death, or a refused enqueue, left none).
    /// An error leaves this message to come back and try again.
    pub(super) async fn ensure_fallback(
        &mut self,
        msg: &DeliveryMessage,
        dead: &DeliveryRecord,
    ) -> Result<(), PortError> {
        let Some(next) = dead.fallback_to() else {
            return Ok(());
        };
        let key = DeliveryKey::derive(&msg.reminder_id, &msg.subscriber_id, next);
        if self.consumer.ports.ledger().get(&key).await?.is_some() {
            return Ok(());
        }
        self.enqueue_fallback(msg, next).await
    }

    /// The channel a death for `reason` hands the reminder on to, if the chain and the
    /// reminder's channels give one (recorded with the death as `fallback_to`). Only a death
    /// known to have sent nothing hands on: after an attempt that may have reached the person
    /// (`held`, the item as claimed, or `may_have_reached`, this answer, says so), the chain ends
    /// here. When the order as it is now names no next channel, the chain recorded at the first
    /// claim does (`held`'s, or this delivery's own reading): a clear after the head's claim
    /// strands nothing (docs/design.md, "Fallback chain"; chaos seeds 131, 291).
    pub(super) fn fallback_for(
        &self,
        d: &Delivery,
        held: &crate::ledger::DeliveryRecord,
        reason: DeadReason,
        may_have_reached: bool,
        prefs: Option<&Preferences>,
    ) -> Option<Channel> {
        if !reason.falls_back() || may_have_reached || held.may_have_reached() {
            return None;
        }
        self.next_in_chain(d, Some(held), prefs)
    }

    /// The next listed channel after this one in `prefs`'s order (as the standby walk goes on);
    /// when that order names none (cleared, or reordered with this channel last), the next in
    /// the chain `held`'s first claim recorded, else in the one this delivery read. The
    /// recorded chain only ever adds a hand-on the order as it is now would not make.
    pub(super) fn next_in_chain(
        &self,
        d: &Delivery,
        held: Option<&DeliveryRecord>,
        prefs: Option<&Preferences>,
    ) -> Option<Channel> {
        let listed = |c: Channel| d.reminder.recipients.contains_key(&c);
        let recorded = held
            .and_then(|h| h.origin())
            .map(|o| o.chain.as_slice())
            .filter(|c| !c.is_empty())
            .unwrap_or(d.chain.as_slice());
        let after = |order: &[Channel]| {
            let i = order.iter().position(|c| *c == self.inc.channel)?;
            order[i + 1..].iter().copied().find(|c| listed(*c))
        };
        let current = prefs.map_or(&[][..], |p| p.fallback.as_slice());
        after(current).or_else(|| after(recorded))
    }

    /// A fallback's message that finds its own channel already dead, for a reason that falls
    /// back, known to have sent nothing and naming no channel (it died before the chain
    /// reached it, an opt-out say): the chain goes on past it, as the standby walk does. The
    /// hand-on is written on that death, then the next channel's message enqueued; without
    /// it, a channel behind, already acknowledged as not needed, was never sent (chaos seed
    /// 35, once the recorded chain handed a redriven head on to a channel already dead).
    pub(super) async fn pass_on(
        &mut self,
        d: &Delivery,
        dead: &DeliveryRecord,
    ) -> Result<(), PortError> {
        let falls_back = dead.dead_reason().is_some_and(DeadReason::falls_back);
        if d.msg.fallback_from.is_none()
            || dead.fallback_to().is_some()
            || dead.may_have_reached()
            || !falls_back
        {
            return Ok(());
        }
        let store = self.consumer.ports.reminders();
        let prefs = match store.preferences(&d.msg.subscriber_id).await {
            Ok(p) => p,
            Err(PortError::Corrupt { .. }) => None,
            Err(e) => return Err(e),
        };
        let Some(next) = self.next_in_chain(d, Some(dead), prefs.as_ref()) else {
            return Ok(());
        };
        let ctx = self.ctx_of(d.msg.delivery_key.clone(), d.reminder.fresh_until);
        let ledger = self.consumer.ports.ledger();
        match transition(ledger, None, Change::HandOn { to: next }, &ctx).await? {
            Written::Applied(_) => {
                self.m.fallbacks += 1;
                self.enqueue_fallback(&d.msg, next).await
            }
            Written::Refused {
                current: Some(c), ..
            } if c.status() == Status::Dead => self.ensure_fallback(&d.msg, &c).await,
            Written::Refused { .. } => Ok(()),
        }
    }

    /// After the death naming `next` was written: its message, to send it now. An error (SQS
    /// refused it or failed) fails this record, so its message comes back and the dead
    /// delivery's next look enqueues it again ([`InFlight::ensure_fallback`]).
    pub(super) async fn enqueue_fallback(
        &mut self,
        dead: &DeliveryMessage,
        next: Channel,
    ) -> Result<(), PortError> {
        let channel = self.inc.channel;
        let mut msg = DeliveryMessage::new(
            dead.reminder_id.clone(),
            dead.subscriber_id.clone(),
            next,
            dead.payload_version,
            dead.due_at,
            dead.fresh_until,
        );
        msg.fallback_from = Some(channel);
        let refused = |code: &str| format!("fallback message to {next} refused: {code}");
        self.send_now(next, "0", &msg, refused).await?;
        tracing::info!(
            delivery_key = %dead.delivery_key,
            reminder_id = %dead.reminder_id,
            from = %channel,
            to = %next,
            fallback_key = %msg.delivery_key,
            "fell back to the next channel"
        );
        Ok(())
    }
}

impl<P: Ports> InFlight<'_, P> {
    /// Enqueue `msg` on `channel`'s queue now, as entry `entry_id`; a refused entry is an
    /// error whose message `refused` words from the queue's code.
    pub(super) async fn send_now(
        &self,
        channel: Channel,
        entry_id: &str,
        msg: &DeliveryMessage,
        refused: impl FnOnce(&str) -> String,
    ) -> Result<(), PortError> {
        let entry = OutgoingMessage {
            entry_id: entry_id.into(),
            body: msg.encode(),
            delay_secs: 0,
        };
        let failed = self
            .consumer
            .ports
            .queue()
            .send_batch(channel, &[entry])
            .await?;
        match failed.first() {
            Some(f) => Err(PortError::Unavailable {
                op: "queue.send_batch",
                message: refused(&f.code),
            }),
            None => Ok(()),
        }
    }
}
