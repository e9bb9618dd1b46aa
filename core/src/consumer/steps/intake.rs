//! Step 1: decode the message and settle everything that needs no claim — a message for
//! later (`not_before`), an unknown reminder, a channel edited away, a cancelled or stale
//! reminder, a due time moved later. What passes is a [`Delivery`] ready to claim.

use std::ops::ControlFlow::{Break, Continue};

use super::dead::Facts;
use super::{Delivery, InFlight, Step};
use crate::delivery::{transition, Written};
use crate::domain::reminder::{freshness, surely_stale_at, Freshness};
use crate::domain::{Channel, DeadReason, DecodeError, DeliveryMessage, Reminder, ReminderStatus};
use crate::ledger::{Change, Ctx, Status};
use crate::ports::{Ledger, Marked, PortError, Ports, Provider, ReminderStore, SendRequest};

fn decode_class(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Malformed(_) => "malformed_message",
        DecodeError::MissingVersion => "missing_version",
        DecodeError::UnknownVersion(_) => "unknown_version",
        DecodeError::KeyMismatch => "key_mismatch",
    }
}

impl<P: Ports> InFlight<'_, P> {
    /// The body as message v1, on the channel whose queue it came from; anything else is a
    /// `schema` dead letter.
    pub(super) async fn decode(&mut self) -> Step<DeliveryMessage> {
        let class = match DeliveryMessage::decode(&self.inc.body) {
            Ok(msg) if msg.channel == self.inc.channel => {
                tracing::Span::current().record("delivery_key", msg.delivery_key.as_str());
                return Ok(Continue(msg));
            }
            Ok(_) => "channel_mismatch",
            Err(e) => decode_class(&e),
        };
        let now = self.now();
        self.dead_schema(class, now).await.map(Break)
    }

    pub(super) async fn intake(&mut self, msg: DeliveryMessage) -> Step<Delivery> {
        let now = self.now();
        let not_before = msg.not_before.filter(|nb| *nb > now);
        if let Some(nb) = not_before.filter(|nb| *nb <= msg.fresh_until) {
            return self.hold(&msg, nb, now).await.map(Break);
        }
        let reminder = match self.reminder(&msg, now).await? {
            Continue(reminder) => reminder,
            Break(action) => return Ok(Break(action)),
        };
        // Judged, and written, at the time the reminder was read: a slow read (up to the
        // storage timeout) may return a reminder another channel expired meanwhile, and an
        // expiry stamped with the time from before the read would say it ended while fresh.
        let now = self.now();
        let ctx = self.ctx(&msg, reminder.fresh_until, now);
        if let Some(nb) = not_before {
            // A wait that ends past freshness (the message's, or the reminder's now): the
            // delivery can never be sent fresh. It waits out its freshness, and its next
            // intake expires it: never called expired while still fresh.
            if nb > reminder.fresh_until {
                if freshness(reminder.fresh_until, now) == Freshness::Stale {
                    return self
                        .expire_unclaimed(&msg, &reminder, &ctx)
                        .await
                        .map(Break);
                }
                let past = surely_stale_at(reminder.fresh_until);
                return self.hold(&msg, past, now).await.map(Break);
            }
            return self.hold(&msg, nb, now).await.map(Break);
        }
        let Some(recipient) = reminder.recipients.get(&self.inc.channel).cloned() else {
            // The channel was edited away before dispatch: nothing to send here.
            return self.finish(&msg, Change::Cancel, &ctx).await.map(Break);
        };
        if reminder.status == ReminderStatus::Cancelled {
            return self.finish(&msg, Change::Cancel, &ctx).await.map(Break);
        }
        let fresh = freshness(reminder.fresh_until, now);
        if fresh == Freshness::Stale || reminder.status == ReminderStatus::Expired {
            return self
                .expire_unclaimed(&msg, &reminder, &ctx)
                .await
                .map(Break);
        }
        if let Freshness::Unsure { until } = fresh {
            // Too close to its deadline to call with a clock that may be off: neither sent
            // nor expired until it is surely stale (an edit meanwhile may extend it).
            return self.hold(&msg, until, now).await.map(Break);
        }
        if reminder.due_at > now {
            // Edited to a later time after it was enqueued: wait for the new due time. An
            // earlier message may have claimed it under the old version's horizon (the edit
            // moved what it found, but a claim can land after that): whatever this delivery's
            // item is, it must outlive the wait, or a TTL would erase the proof of a send.
            crate::delivery::extend_horizon(self.consumer.ports.ledger(), &ctx).await?;
            return self.hold(&msg, reminder.due_at, now).await.map(Break);
        }
        let request = SendRequest {
            delivery_key: msg.delivery_key.clone(),
            recipient,
            content: reminder.content.clone(),
            payload_version: reminder.payload_version,
        };
        let partition = self
            .consumer
            .ports
            .provider(self.inc.channel)
            .partition(self.inc.channel);
        Ok(Continue(Delivery {
            msg,
            seen: ctx,
            reminder,
            request,
            partition,
            chain_head: false,
            chain: Vec::new(),
        }))
    }

    /// SMS only to the allowed calling codes: a number elsewhere dies `country_not_allowed`
    /// before any claim (no attempt, no call), and the chain, if any, hands the reminder on as
    /// after any death known to have sent nothing: the death names the next channel and its
    /// message is enqueued (chaos seed 241: a third channel, already acknowledged as not needed,
    /// waited for a message nobody sent). After the standby step, so a channel waiting its turn
    /// behind another (which may deliver) never dies for it.
    pub(super) async fn country(&mut self, d: Delivery) -> Step<Delivery> {
        let countries = &self.consumer.cfg.sms_countries;
        if self.inc.channel != crate::domain::Channel::Sms
            || countries.allows(d.request.recipient.expose())
        {
            return Ok(Continue(d));
        }
        // The number itself is never logged or stored in the error.
        let error = format!(
            "country_not_allowed: the number's calling code is not in \
             SMS_ALLOWED_COUNTRY_CODES ({})",
            countries.describe()
        );
        let next = self.country_fallback(&d).await?;
        let (fresh, now) = (d.reminder.fresh_until, self.now());
        let reason = DeadReason::CountryNotAllowed;
        self.dead_handing_on(&d.msg, (reason, error, next), fresh, now)
            .await
            .map(Break)
    }

    /// The channel a `country_not_allowed` death hands on to ([`InFlight::next_in_chain`]): the
    /// next listed channel of the subscriber's order as it is now; when that names none, the
    /// next in the chain its own item's first claim recorded (a redriven delivery), else in
    /// the one the standby step read. The ledger drops it if an earlier attempt may have
    /// reached the person.
    async fn country_fallback(&mut self, d: &Delivery) -> Result<Option<Channel>, PortError> {
        let own = self
            .consumer
            .ports
            .ledger()
            .get(&d.msg.delivery_key)
            .await?;
        let store = self.consumer.ports.reminders();
        let prefs = match store.preferences(&d.msg.subscriber_id).await {
            Ok(p) => p,
            // Unreadable preferences name no order: the death hands nothing on.
            Err(PortError::Corrupt { .. }) => None,
            Err(e) => return Err(e),
        };
        Ok(self.next_in_chain(d, own.as_ref(), prefs.as_ref()))
    }

    /// The reminder the message names. An item that cannot be read is data, not an outage:
    /// dead at once naming the field, never retried for hours as an infrastructure error.
    async fn reminder(
        &mut self,
        msg: &DeliveryMessage,
        now: crate::clock::Timestamp,
    ) -> Step<crate::domain::Reminder> {
        let (reason, error) = match self.consumer.ports.reminders().get(&msg.reminder_id).await {
            Ok(Some(r)) if r.status == ReminderStatus::Invalid => {
                let why = r.invalid_reason.as_deref().unwrap_or("quarantined");
                (DeadReason::InvalidReminder, format!("invalid: {why}"))
            }
            // Listed, but nothing valid to send to on this channel: a dead letter naming the
            // field, not a silent cancel (the reminder's other channels still go out).
            Ok(Some(r)) if r.unsendable.contains_key(&self.inc.channel) => {
                let why = &r.unsendable[&self.inc.channel];
                (DeadReason::InvalidReminder, format!("unreadable: {why}"))
            }
            Ok(Some(r)) => return Ok(Continue(r)),
            Ok(None) => (DeadReason::UnknownReminder, "reminder_not_found".to_owned()),
            Err(PortError::Corrupt { message, .. }) => (
                DeadReason::InvalidReminder,
                format!("unreadable: {message}"),
            ),
            Err(e) => return Err(e),
        };
        self.dead_unsendable(msg, reason, error, msg.fresh_until, now)
            .await
            .map(Break)
    }

    /// Found stale: the reminder is marked `expired` at the version read before the ledger
    /// says so, as the scheduler's expiry does, so that an edit that landed since (a reschedule,
    /// more freshness) wins, and none lands after. `false` when one came first: the caller looks
    /// again.
    pub(super) async fn mark_expired(&mut self, r: &Reminder) -> Result<bool, PortError> {
        if r.status == ReminderStatus::Expired {
            return Ok(true);
        }
        let store = self.consumer.ports.reminders();
        let marked = store
            .mark(&r.reminder_id, r.payload_version, ReminderStatus::Expired)
            .await?;
        Ok(marked != Marked::Changed)
    }

    /// Stale before any claim: expired (reminder, then ledger), or, when an edit landed
    /// since the read, looked at again in a second.
    pub(super) async fn expire_unclaimed(
        &mut self,
        msg: &DeliveryMessage,
        reminder: &Reminder,
        ctx: &Ctx,
    ) -> Result<super::Action, PortError> {
        if self.mark_expired(reminder).await? {
            return self.finish(msg, Change::Expire, ctx).await;
        }
        tracing::info!(delivery_key = %msg.delivery_key, "found stale, but edited since: looked at again");
        let now = self.now();
        self.hold(msg, now.plus(std::time::Duration::from_secs(1)), now)
            .await
    }

    /// Cancel or expire before any claim: never sent. A delivery still `sending` was claimed
    /// by a worker that never recorded an outcome: resolve it ([`InFlight::resolve_abandoned`]),
    /// never ack it as it is.
    pub(super) async fn finish(
        &mut self,
        msg: &DeliveryMessage,
        change: Change,
        ctx: &Ctx,
    ) -> Result<super::Action, crate::ports::PortError> {
        let cancelled = change == Change::Cancel;
        let written = transition(self.consumer.ports.ledger(), None, change, ctx).await?;
        match written {
            Written::Applied(_) if cancelled => self.m.cancelled += 1,
            Written::Applied(_) => self.m.expired += 1,
            // Cancelled by the operator's cancel, which writes the ledger first: this message
            // is a cancelled delivery, consumed as such.
            Written::Refused {
                current: Some(r), ..
            } if r.status() == Status::Cancelled && cancelled => self.m.cancelled += 1,
            Written::Refused {
                current: Some(r), ..
            } if r.status() == Status::Sending => {
                return self.resolve_abandoned(msg, r, ctx).await;
            }
            // Died before, perhaps without its copy (a crash between the two): the evidence
            // is made before this message goes.
            Written::Refused {
                current: Some(r), ..
            } if r.status() == Status::Dead => {
                return self.ensure_copied(msg, r, ctx.now).await;
            }
            // A newer writer's state: not finished here, and the message is not dropped.
            Written::Refused {
                current: Some(r), ..
            } if !r.status().is_known() => {
                return self.newer_status(msg, &r, ctx.now).await;
            }
            Written::Refused { .. } => {}
        }
        let what = if cancelled { "cancelled" } else { "stale" };
        tracing::info!(delivery_key = %ctx.key, outcome_class = what, next_action = "ack", "transition");
        Ok(super::Action::Ack)
    }

    /// No such reminder, or one that cannot be read or sent: dead with its reason and an
    /// error naming the field (a delivery already in the ledger in another state keeps it),
    /// with the evidence in the DLQ either way. `fresh_until` sets the item's TTL: the
    /// reminder's as read, when it could be read (an edit may have moved it past the
    /// message's, and a death under the old horizon would be gone before its copy is made),
    /// else the message's.
    pub(super) async fn dead_unsendable(
        &mut self,
        msg: &DeliveryMessage,
        reason: DeadReason,
        error: String,
        fresh_until: crate::clock::Timestamp,
        now: crate::clock::Timestamp,
    ) -> Result<super::Action, PortError> {
        self.dead_handing_on(msg, (reason, error, None), fresh_until, now)
            .await
    }

    /// [`InFlight::dead_unsendable`], the death naming `fallback_to` (a reason that falls
    /// back): its message is enqueued (or, for a death found written, made sure of) before
    /// the DLQ copy.
    pub(super) async fn dead_handing_on(
        &mut self,
        msg: &DeliveryMessage,
        (reason, error, fallback_to): (DeadReason, String, Option<Channel>),
        fresh_until: crate::clock::Timestamp,
        now: crate::clock::Timestamp,
    ) -> Result<super::Action, PortError> {
        let ctx = self.ctx(msg, fresh_until, now);
        let change = Change::Die {
            token: None,
            reason,
            spends_attempt: false,
            error: Some(error.clone()),
            fallback_to,
            maybe_sent: false,
        };
        let written = transition(self.consumer.ports.ledger(), None, change, &ctx).await?;
        let (dead, facts) = match written {
            Written::Applied(r) => {
                self.m.dead(reason);
                if r.fallback_to().is_some() {
                    self.m.fallbacks += 1;
                }
                let facts = Facts::of_ours(&r, &self.consumer.cfg);
                (r, facts)
            }
            // Died before (perhaps crashed before its copy): make sure the evidence exists,
            // as the ledger tells it.
            Written::Refused {
                current: Some(r), ..
            } if r.status() == Status::Dead => {
                let facts = Facts::of(&r);
                (r, facts)
            }
            // Claimed and never settled: wait for its lease, then the ambiguous rule (a
            // resend is no longer wanted).
            Written::Refused {
                current: Some(r), ..
            } if r.status() == Status::Sending => {
                return self.resolve_abandoned(msg, r, &ctx).await;
            }
            Written::Refused {
                current: Some(r), ..
            } if !r.status().is_known() => return self.newer_status(msg, &r, now).await,
            // Already delivered, expired or cancelled: nothing died.
            Written::Refused {
                current: Some(r), ..
            } if r.status().is_terminal() => return Ok(super::Action::Ack),
            Written::Refused { refused, .. } => {
                return Err(PortError::Invariant {
                    op: "consumer.dead_unsendable",
                    message: format!("an unfenced death was refused: {refused}"),
                })
            }
        };
        // A crash after the death, or a refused enqueue, left the next channel no message:
        // this one's return makes sure of it.
        self.ensure_fallback(msg, &dead).await?;
        let reason = dead.dead_reason().unwrap_or(reason);
        if let Some(until) = self.copy_once(reason, dead, facts).await? {
            // Another worker is copying: look again once its claim lapses.
            let again = until.plus(std::time::Duration::from_secs(1));
            return self.hold(msg, again, now).await;
        }
        let what = reason.as_str();
        super::log_transition(msg, 0, what, "dead", std::time::Duration::ZERO);
        Ok(super::Action::Ack)
    }
}
