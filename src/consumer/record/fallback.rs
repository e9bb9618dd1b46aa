//! Fallback channels (DESIGN §12). With a fallback order in the subscriber's preferences, a
//! reminder's channels behind the first one it lists wait in standby: their own messages are
//! acknowledged without a claim or a send. When a channel's delivery dies for a reason that
//! means it cannot reach the person (`rejected`, `opted_out`, `suppressed`,
//! `expired_quiet_hours`), the next channel in the order gets a delivery of its own: a message
//! naming `fallback_from`, keyed by its own (reminder, subscriber, channel), so its ledger item
//! sends it at most once however often it is enqueued.
//!
//! Crash safety: the fallback message is enqueued before the death is written (the death
//! write records `fallback_to`). A crash between the two leaves the first delivery claimed but
//! not dead; its message comes back, the rules decide the same death again and enqueue again,
//! and the second copy is a duplicate the fallback's ledger item refuses. The other order
//! could lose the fallback for good.

use std::ops::ControlFlow;

use super::{Delivery, Record, Step};
use crate::consumer::Action;
use crate::domain::{Channel, DeadReason, DeliveryMessage};
use crate::ports::{DeliveryQueue, OutgoingMessage, PortError, Ports, ReminderStore};

impl<P: Ports> Record<'_, P> {
    /// `Break(Ack)` when this message's channel waits in standby behind another channel the
    /// reminder lists (and it is not itself a fallback): nothing is claimed or sent; a death of
    /// the channel ahead enqueues its delivery.
    pub(super) async fn standby(&mut self, d: Delivery) -> Step<Delivery> {
        if d.msg.fallback_from.is_some() || d.reminder.recipients.len() < 2 {
            return Ok(ControlFlow::Continue(d));
        }
        let store = self.consumer.ports.reminders();
        let Some(prefs) = store.preferences(&d.msg.subscriber_id).await? else {
            return Ok(ControlFlow::Continue(d));
        };
        let listed = |c: Channel| d.reminder.recipients.contains_key(&c);
        if !prefs.is_standby(self.inc.channel, listed) {
            return Ok(ControlFlow::Continue(d));
        }
        self.m.standby += 1;
        tracing::info!(
            delivery_key = %d.msg.delivery_key,
            reminder_id = %d.msg.reminder_id,
            channel = %self.inc.channel,
            "standby: sent only as a fallback"
        );
        Ok(ControlFlow::Break(Action::Ack))
    }

    /// Before a death for `reason` is written: the channel it falls back to, its message
    /// enqueued (`None` when the reason, the preferences or the reminder's channels give
    /// none). An enqueue that fails fails the record, so the death is decided again.
    pub(super) async fn fall_back(
        &mut self,
        d: &Delivery,
        reason: DeadReason,
    ) -> Result<Option<Channel>, PortError> {
        if !reason.falls_back() {
            return Ok(None);
        }
        let store = self.consumer.ports.reminders();
        let Some(prefs) = store.preferences(&d.msg.subscriber_id).await? else {
            return Ok(None);
        };
        let channel = self.inc.channel;
        let listed = |c: Channel| d.reminder.recipients.contains_key(&c);
        let Some(next) = prefs.fallback_for(channel, listed) else {
            return Ok(None);
        };
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
        let failed = self.consumer.ports.queue().send_batch(next, &[out]).await?;
        if let Some(f) = failed.first() {
            let message = format!("fallback to {next}: {}", f.code);
            let op = crate::ports::queue::OP_SEND;
            return Err(if f.sender_fault {
                PortError::Refused { op, message }
            } else {
                PortError::Unavailable { op, message }
            });
        }
        self.m.fallbacks += 1;
        tracing::info!(
            delivery_key = %d.msg.delivery_key,
            reminder_id = %d.msg.reminder_id,
            from = %channel,
            to = %next,
            fallback_key = %msg.delivery_key,
            reason = reason.as_str(),
            "fell back to the next channel"
        );
        Ok(Some(next))
    }
}
