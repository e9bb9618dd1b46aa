//! Fallback channels (docs/design.md, "Fallback chain"). With a fallback order in the subscriber's
//! preferences, a reminder's channels behind the first one it lists wait in standby. When a
//! channel's delivery dies for a reason that means it cannot reach the person (`rejected`,
//! `opted_out`, `suppressed`, `expired_quiet_hours`), the next listed channel in the order gets a
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

use std::ops::ControlFlow;
use std::time::Duration;

use super::{Delivery, InFlight, Step};
use crate::consumer::Action;
use crate::delivery::standby::{heads_chain, listed_order, turn, Turn};
use crate::delivery::{transition, Written};
use crate::domain::{Channel, DeadReason, DeliveryKey, DeliveryMessage, Preferences};
use crate::ledger::{Change, DeliveryRecord, Status};
use crate::ports::{DeliveryQueue, Ledger, OutgoingMessage, PortError, Ports, ReminderStore};

/// The batch entry id of a message [`InFlight::rewake`] enqueues again after a redrive (the
/// chaos checker's `fallback-best-effort` plant drops these with the fallbacks' own).
pub const REWAKE_ENTRY: &str = "rewake";

/// A standby channel looks at the chain again this long (times its receives, up to 20) after
/// the channel ahead could next change.
pub const STANDBY_RECHECK: Duration = Duration::from_secs(30);

impl<P: Ports> InFlight<'_, P> {
    /// Before the claim: a channel in standby behind another that the reminder lists is held
    /// until that one settles, then sent (its turn came) or acknowledged (it did not), by the
    /// ledger item of the channel ahead. A fallback's own message goes on, unless the head of
    /// another chain that holds its channel is in flight or may have reached the person.
    pub(super) async fn standby(&mut self, mut d: Delivery) -> Step<Delivery> {
        // One channel, never edited: no other channel of the reminder ever had a delivery.
        // Once edited, one it listed before may have reached the person (docs/design.md, "Fallback
        // chain").
        let alone = d.reminder.recipients.len() < 2 && d.reminder.payload_version <= 1;
        if d.msg.redrive.is_some() && !alone {
            self.rewake(&d).await?;
        }
        if let Some(from) = d.msg.fallback_from {
            // Sent as `from`'s fallback: in the chain `from`'s claim recorded. Never beside
            // the head of another chain that holds this channel (claimed under an order the
            // subscriber changed since): held while it is in flight, not needed once it may
            // have reached the person.
            d.chain = self.recorded_chain(&d, from).await?;
            let listed = |c: Channel| d.reminder.recipients.contains_key(&c);
            let (ledger, now) = (self.consumer.ports.ledger(), self.now());
            let (reminder, subscriber) = (&d.msg.reminder_id, &d.msg.subscriber_id);
            let channel = self.inc.channel;
            // Under no order, the turn is the recorded chains' alone.
            let no_order = Preferences::default();
            return match turn(
                ledger, &no_order, reminder, subscriber, listed, channel, now,
            )
            .await?
            {
                Some(turn) => self.take_turn(d, turn, now).await,
                None => Ok(ControlFlow::Continue(d)),
            };
        }
        if alone {
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
                    .dead_unsendable(
                        &d.msg,
                        DeadReason::InvalidReminder,
                        why,
                        d.reminder.fresh_until,
                        now,
                    )
                    .await?;
                return Ok(ControlFlow::Break(action));
            }
            Err(e) => return Err(e),
        };
        let channel = self.inc.channel;
        let listed = |c: Channel| d.reminder.recipients.contains_key(&c);
        let now = self.now();
        let ledger = self.consumer.ports.ledger();
        if heads_chain(&prefs, listed, channel) {
            d.chain = listed_order(&prefs, listed);
        }
        let (reminder, subscriber) = (&d.msg.reminder_id, &d.msg.subscriber_id);
        let Some(turn) = turn(ledger, &prefs, reminder, subscriber, listed, channel, now).await?
        else {
            d.chain_head = heads_chain(&prefs, listed, channel);
            return Ok(ControlFlow::Continue(d));
        };
        self.take_turn(d, turn, now).await
    }

    /// What a channel in standby does on its turn: sent as the fallback of the death ahead,
    /// acknowledged as not needed, or held until the channel ahead could next change.
    async fn take_turn(
        &mut self,
        mut d: Delivery,
        turn: Turn,
        now: crate::clock::Timestamp,
    ) -> Step<Delivery> {
        let channel = self.inc.channel;
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
                // The death ahead names this channel before it sends, so that no redrive
                // revives it once this channel has served the reminder (docs/design.md, "Fallback
                // chain").
                if !self.handed_on(&d, from).await? {
                    log("the death ahead changed: looked at again");
                    let again = now.plus(STANDBY_RECHECK);
                    return Ok(ControlFlow::Break(self.hold(&d.msg, again, now).await?));
                }
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

    /// A redriven delivery: each other channel the reminder lists that has no ledger item (its
    /// own message was acknowledged as not needed, the chain having ended at this death) gets
    /// its own message again, and its standby step decides afresh under the order as it is
    /// now (it waits for this one, takes over from it, or, with the order cleared since,
    /// goes on its own). Without it, such a channel was never sent (chaos seed 35: an order
    /// cleared after the standby was found not needed, and the channel outside the chain).
    /// A duplicate of a message the ledger already settled is harmless.
    async fn rewake(&mut self, d: &Delivery) -> Result<(), PortError> {
        let ledger = self.consumer.ports.ledger();
        let mut out = Vec::new();
        for &c in d.reminder.recipients.keys() {
            if c == self.inc.channel {
                continue;
            }
            let key = DeliveryKey::derive(&d.msg.reminder_id, &d.msg.subscriber_id, c);
            if ledger.get(&key).await?.is_none() {
                out.push(c);
            }
        }
        for c in out {
            let msg = DeliveryMessage::new(
                d.msg.reminder_id.clone(),
                d.msg.subscriber_id.clone(),
                c,
                d.reminder.payload_version,
                d.reminder.due_at,
                d.reminder.fresh_until,
            );
            let refused = |code: &str| format!("{c}'s message after a redrive refused: {code}");
            self.send_now(c, REWAKE_ENTRY, &msg, refused).await?;
            tracing::info!(delivery_key = %d.msg.delivery_key, channel = %c, "redriven: the reminder's channel with no delivery enqueued again");
        }
        Ok(())
    }

    /// The chain the claim of `from`'s delivery recorded (empty when it recorded none).
    async fn recorded_chain(&self, d: &Delivery, from: Channel) -> Result<Vec<Channel>, PortError> {
        let key = DeliveryKey::derive(&d.msg.reminder_id, &d.msg.subscriber_id, from);
        let ledger = self.consumer.ports.ledger();
        Ok(ledger
            .get(&key)
            .await?
            .and_then(|r| r.origin().map(|o| o.chain.clone()))
            .unwrap_or_default())
    }

    /// Record on the death of `from` that it handed the reminder on to this channel (a
    /// conditional write, ordered against a redrive of that death): whether it now says so.
    async fn handed_on(&mut self, d: &Delivery, from: Channel) -> Result<bool, PortError> {
        let channel = self.inc.channel;
        let ctx = crate::ledger::Ctx {
            key: crate::domain::DeliveryKey::derive(&d.msg.reminder_id, &d.msg.subscriber_id, from),
            now: self.now(),
            expires_at: self
                .consumer
                .cfg
                .retention
                .expires_at(d.reminder.fresh_until),
            origin: None,
        };
        let change = Change::HandOn { to: channel };
        let ledger = self.consumer.ports.ledger();
        Ok(match transition(ledger, None, change, &ctx).await? {
            Written::Applied(_) => true,
            Written::Refused { current, .. } => current
                .is_some_and(|c| c.status() == Status::Dead && c.fallback_to() == Some(channel)),
        })
    }

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
        let ctx = crate::ledger::Ctx {
            key: d.msg.delivery_key.clone(),
            now: self.now(),
            expires_at: self
                .consumer
                .cfg
                .retention
                .expires_at(d.reminder.fresh_until),
            origin: None,
        };
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
    async fn send_now(
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
