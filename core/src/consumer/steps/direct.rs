//! The one-read path: a sole channel's message — the scheduler's word that the reminder listed
//! this channel alone at its first version, with the address's keyed hash — is claimed first,
//! from the message, and everything the send needs is read after the claim in one request: the
//! reminder, the preferences and the suppression (one strongly consistent `BatchGetItem` on
//! DynamoDB). Read after the claim, an opt-out, a suppression or a cancel that landed before it
//! wins, as on the two-read path (`tests/consumer/before_claim.rs`).
//!
//! Only the plain case takes it: no wait (`not_before`), no redrive, no fallback, fresh and
//! due by the message, an open gate. Whatever the reminder as read says beyond the message —
//! edited, cancelled, expired, unknown, unreadable, another address or key, a second channel,
//! a country SMS may not reach — the claim is given back (nothing spent, counted
//! `one_read_released`; an item the claim created is deleted, so nothing reads it as claimed)
//! and the two-read path decides from its own reads, exactly as for a message without the
//! marks. So a deploy in progress (old messages, the old index, a key
//! that cannot be read) only costs reads, never changes a decision.

use super::{Action, Delivery, InFlight, Lease};
use crate::delivery::{claim, transition, Claim, ClaimRequest, Written};
use crate::domain::reminder::{freshness, Freshness};
use crate::domain::{
    AddressHash, DeliveryMessage, Preferences, Reminder, ReminderStatus, Suppression,
    SuppressionKey,
};
use crate::ledger::{Change, LeaseToken};
use crate::ports::{Cas, Expected, Ledger, PortError, Ports, Provider, ReminderStore, SendRequest};

/// Versions of our own item a give-back follows (each an edit's horizon write landing on it
/// meanwhile) before it leaves the item to its lease.
const UNDO_ROUNDS: usize = 4;

/// What the one-read path did with a message.
pub(super) enum Direct {
    /// Not taken, or its claim given back: the two-read path takes the message.
    TwoReads(DeliveryMessage),
    /// Claimed, with the preferences and the suppression read after the claim.
    Claimed(Box<Claimed>),
    /// The record ended: the give-back came too late (another worker holds the lease).
    Done(Action),
}

/// A one-read claim: the delivery, our lease, and the preferences and suppression read after
/// the claim.
pub(super) struct Claimed {
    pub delivery: Delivery,
    pub lease: Lease,
    pub rules: (Option<Preferences>, Option<Suppression>),
}

/// The message's marks allow the one-read path: sole, nothing to wait for or to look up.
fn qualifies(msg: &DeliveryMessage, key: Option<&SuppressionKey>) -> bool {
    msg.sole_channel
        && msg.payload_version <= 1
        && msg.not_before.is_none()
        && msg.redrive.is_none()
        && msg.fallback_from.is_none()
        // With suppressions kept, the batch must name the address's suppression.
        && (key.is_none() || msg.address_hash.is_some())
}

impl<P: Ports> InFlight<'_, P> {
    pub(super) async fn direct(&mut self, msg: DeliveryMessage) -> Result<Direct, PortError> {
        if !msg.sole_channel {
            return Ok(Direct::TwoReads(msg));
        }
        let key = self.consumer.suppression_key().await?;
        if !qualifies(&msg, key.as_ref()) {
            return Ok(Direct::TwoReads(msg));
        }
        // The claim, a send and its outcome must fit before the deadline, as on the two-read
        // path (whose check comes after its read, as this one's read comes after the claim);
        // when they do not, that path decides (it releases the message, or settles it with no
        // claim: a stale or cancelled reminder).
        let cfg = &self.consumer.cfg;
        let storage = crate::ports::STORAGE_OPERATION_TIMEOUT;
        if !self.time_left_for(storage + cfg.provider_timeout + storage) {
            return Ok(Direct::TwoReads(msg));
        }
        let now = self.now();
        if freshness(msg.fresh_until, now) != Freshness::Fresh || msg.due_at > now {
            return Ok(Direct::TwoReads(msg));
        }
        // The gate as the two-read path's admission reads it (cached), without its holds:
        // anything but an open gate is the two-read path's to count and hold.
        let c = self.consumer;
        let partition = c
            .ports
            .provider(self.inc.channel)
            .partition(self.inc.channel);
        let gate = c.gates.state(c.ports.gate(), &partition, now).await?;
        if gate.throttled_until.is_some_and(|u| u > now) || gate.breaker.is_some() {
            return Ok(Direct::TwoReads(msg));
        }
        let ctx = self.ctx(&msg, msg.fresh_until, now);
        let token = LeaseToken::generate(self.rng);
        let req = ClaimRequest {
            token: token.clone(),
            lease_expires_at: now.plus(cfg.lease),
            payload_version: msg.payload_version,
            policy: cfg.policy.clone(),
        };
        // Anything but a fresh lease (a duplicate, a retry not yet due, a lapsed lease, a
        // death) is the two-read path's: its claim answers the same, with the reminder read.
        let Claim::Acquired(record) = claim(c.ports.ledger(), req, &ctx).await? else {
            return Ok(Direct::TwoReads(msg));
        };
        self.m.one_read += 1;
        let hash = msg.address_hash.as_ref().filter(|_| key.is_some());
        let store = c.ports.reminders();
        let read = store
            .delivery_read(&msg.reminder_id, &msg.subscriber_id, hash)
            .await;
        let read = match read {
            Ok(read) => read,
            // Unreadable preferences or suppression: the two-read path names them.
            Err(PortError::Corrupt { .. }) => {
                return self.give_back(msg, record, token).await;
            }
            Err(e) => {
                // Nothing sent: the lease goes back, and the record is retried.
                let _ = self.give_back(msg, record, token).await?;
                return Err(e);
            }
        };
        let reminder = match read.reminder {
            Ok(Some(r)) => r,
            _ => return self.give_back(msg, record, token).await,
        };
        let Some(request) = self.as_messaged(&msg, &reminder, key.as_ref()) else {
            return self.give_back(msg, record, token).await;
        };
        let seen = self.ctx(&msg, reminder.fresh_until, self.now());
        let delivery = Delivery {
            msg,
            seen,
            reminder,
            request,
            partition,
            chain_head: false,
            chain: Vec::new(),
        };
        let lease = Lease {
            record,
            token,
            half_open: false,
            probe: None,
            prefs: None,
        };
        let rules = (read.prefs, read.suppression);
        Ok(Direct::Claimed(Box::new(Claimed {
            delivery,
            lease,
            rules,
        })))
    }

    /// The send request, when the reminder as read is what the message said and nothing on
    /// it needs the two-read path: the same version and times, live, due, listing this
    /// channel alone (as the standby step judges a reminder alone), an address that can be
    /// sent to (and, for SMS, in an allowed country) whose hash is the message's.
    fn as_messaged(
        &self,
        msg: &DeliveryMessage,
        r: &Reminder,
        key: Option<&SuppressionKey>,
    ) -> Option<SendRequest> {
        let channel = self.inc.channel;
        let live = matches!(
            r.status,
            ReminderStatus::Scheduled | ReminderStatus::Enqueued
        );
        let same = r.payload_version == msg.payload_version
            && r.fresh_until == msg.fresh_until
            && r.due_at == msg.due_at;
        let alone = r.recipients.len() < 2 && r.payload_version <= 1;
        if !live || !same || !alone || r.unsendable.contains_key(&channel) {
            return None;
        }
        let recipient = r.recipients.get(&channel)?;
        if channel == crate::domain::Channel::Sms
            && !self.consumer.cfg.sms_countries.allows(recipient.expose())
        {
            return None;
        }
        if let Some(key) = key {
            if msg.address_hash.as_ref() != Some(&AddressHash::of(key, recipient)) {
                return None;
            }
        }
        Some(SendRequest {
            delivery_key: msg.delivery_key.clone(),
            recipient: recipient.clone(),
            content: r.content.clone(),
            payload_version: r.payload_version,
        })
    }

    /// Give the one-read claim back, nothing spent, and hand the message to the two-read
    /// path. An item this claim created (its first transition) is deleted, as if never
    /// claimed: an item of its own would let a channel the reminder now holds in standby go
    /// ahead of the head of its fallback order, and tell the redrive and the chain's origin
    /// a claim was made. An item that was there before is released, as any claim is. A
    /// refusal means another worker took the lease over (it cannot have lapsed this soon but
    /// for a stalled worker): that worker's handle decides.
    async fn give_back(
        &mut self,
        msg: DeliveryMessage,
        record: crate::ledger::DeliveryRecord,
        token: LeaseToken,
    ) -> Result<Direct, PortError> {
        self.m.one_read_released += 1;
        let given_back = if record.seq() == 1 {
            self.undo_claim(record, &token).await?
        } else {
            let ctx = self.ctx(&msg, msg.fresh_until, self.now());
            let change = Change::Release {
                token,
                why: "the reminder as read was not what its message said: read again",
            };
            let ledger = self.consumer.ports.ledger();
            matches!(
                transition(ledger, Some(record), change, &ctx).await?,
                Written::Applied(_)
            )
        };
        if given_back {
            return Ok(Direct::TwoReads(msg));
        }
        tracing::warn!(delivery_key = %msg.delivery_key, "one-read lease given back too late: another worker holds it");
        Ok(Direct::Done(Action::Leave))
    }

    /// Delete the item our claim created, at its version. An edit's horizon write may have
    /// landed on it since (a write that keeps our lease, bumping its version): still ours,
    /// deleted at the version found. Gone already (our own delete, applied before its answer
    /// was lost): given back. Anything else is another worker's now.
    async fn undo_claim(
        &mut self,
        mut record: crate::ledger::DeliveryRecord,
        token: &LeaseToken,
    ) -> Result<bool, PortError> {
        let ledger = self.consumer.ports.ledger();
        for _ in 0..UNDO_ROUNDS {
            let expected = Expected::of(Some(&record));
            match ledger.delete_if(record.key(), expected).await? {
                Cas::Applied | Cas::Conflict(None) => return Ok(true),
                Cas::Conflict(Some(current))
                    if current.status() == crate::ledger::Status::Sending
                        && current.lease_token() == Some(token)
                        && current.attempt_count() == record.attempt_count() =>
                {
                    record = *current;
                }
                Cas::Conflict(Some(_)) => return Ok(false),
            }
        }
        Ok(false)
    }
}
