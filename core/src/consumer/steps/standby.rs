//! A channel in standby behind another in a fallback order (docs/design.md, "Fallback chain"):
//! its message is held, not acknowledged, until the ledger item of the channel ahead settles,
//! then sent (its turn came) or acknowledged (it did not). The channel ahead's death hands on
//! to it ([`super::fallback`]); the standby message is what makes a lost hand-on harmless.

use std::ops::ControlFlow;
use std::time::Duration;

use super::{Delivery, InFlight, Step};
use crate::consumer::Action;
use crate::delivery::standby::{heads_chain, listed_order, turn, Turn};
use crate::delivery::{transition, Written};
use crate::domain::{Channel, DeadReason, DeliveryKey, DeliveryMessage, Preferences};
use crate::ledger::{Change, Status};
use crate::ports::{Ledger, PortError, Ports, ReminderStore};

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
        let ctx = self.ctx_of(
            crate::domain::DeliveryKey::derive(&d.msg.reminder_id, &d.msg.subscriber_id, from),
            d.reminder.fresh_until,
        );
        let change = Change::HandOn { to: channel };
        let ledger = self.consumer.ports.ledger();
        Ok(match transition(ledger, None, change, &ctx).await? {
            Written::Applied(_) => true,
            Written::Refused { current, .. } => current
                .is_some_and(|c| c.status() == Status::Dead && c.fallback_to() == Some(channel)),
        })
    }
}
