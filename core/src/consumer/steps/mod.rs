//! One message's steps through the consumer (docs/design.md, "Ledger" and "Failures and retries"), in the order a
//! reader follows it:
//!
//! 0. [`direct`]: a sole channel's message is claimed first and read in one request (the
//!    one-read path), going on at step 3 with what it read; anything else, or a reminder that
//!    is not what its message said (the claim given back), takes steps 1 and 2;
//! 1. [`intake`]: decode the message, wait out `not_before`, load the reminder and settle what
//!    needs no claim (unknown, cancelled, stale, due later, channel edited away); then
//!    [`standby`]: a channel behind another in a fallback order is held until that one settles
//!    ([`fallback`] is the hand-on from a death); then an SMS only to an allowed calling code
//!    (in [`intake`]);
//! 2. [`claim`]: the provider gate, then one conditional write for the lease (a lease that ran
//!    out mid-send is taken over or killed by the ambiguous rule);
//! 3. [`rules`]: the recipient's opt-outs and quiet hours, read after the claim;
//! 4. send, with the delivery key as idempotency key;
//! 5. [`settle`]: the outcome, written fenced by the lease, and what the policy decides next.
//!
//! Waits go through [`hold`] (visibility, or a delayed copy), dead letters through [`dead`],
//! the one place their evidence is built. Each step answers `Continue(next input)` or
//! `Break(action)`: the record is done with that action.

/// Unwrap a step's `Continue`, or end the record with its action.
macro_rules! step {
    ($e:expr) => {
        match $e? {
            ::std::ops::ControlFlow::Continue(v) => v,
            ::std::ops::ControlFlow::Break(action) => return Ok(action),
        }
    };
}

/// [`step!`] inside a step: a `Break` is passed on as this step's own.
macro_rules! pass {
    ($e:expr) => {
        match $e? {
            ::std::ops::ControlFlow::Continue(v) => v,
            ::std::ops::ControlFlow::Break(action) => {
                return Ok(::std::ops::ControlFlow::Break(action))
            }
        }
    };
}

mod claim;
mod dead;
mod direct;
mod fallback;
pub(super) mod health;
mod hold;
mod intake;
mod rules;
mod settle;
mod standby;

pub use claim::NEWER_STATUS_WAIT;
pub use standby::REWAKE_ENTRY;

use std::ops::ControlFlow;
use std::time::Duration;

use rand::rngs::StdRng;

use super::{Action, Consumer, Incoming, Metrics};
use crate::clock::{Clock, Timestamp};
use crate::domain::{DeliveryKey, DeliveryMessage, Reminder};
use crate::ledger::{Ctx, DeliveryRecord, LeaseToken};
use crate::policy::OutcomeClass;
use crate::ports::{DeliveryQueue, GatePartition, PortError, Ports, Provider, SendRequest};

/// What one step hands to the next, or the action that ends the message's steps.
type Step<T> = Result<ControlFlow<Action, T>, PortError>;

/// One message in flight: the consumer, the message as received, and the message's own random
/// source and counters.
struct InFlight<'a, P: Ports> {
    consumer: &'a Consumer<P>,
    inc: &'a Incoming,
    /// The invocation's deadline: no step starts that could outlast it.
    deadline: Option<Timestamp>,
    rng: &'a mut StdRng,
    m: &'a mut Metrics,
}

/// A delivery that passed intake: what to send, to whom, through which gate partition, and
/// the moment intake looked at it.
struct Delivery {
    msg: DeliveryMessage,
    /// Intake's clock reading and context: the gate is checked at that moment, and a delivery
    /// gone stale before its claim is expired with them.
    seen: Ctx,
    reminder: Reminder,
    request: SendRequest,
    partition: GatePartition,
    /// Claimed as the head of the subscriber's fallback order (recorded on its first claim).
    chain_head: bool,
    /// The chain this delivery is in (the order's listed channels, as its standby step read
    /// them, or as the death it falls back from recorded them): recorded on its first claim.
    chain: Vec<crate::domain::Channel>,
}

/// Our lease on a delivery.
#[derive(Clone)]
struct Lease {
    record: DeliveryRecord,
    token: LeaseToken,
    /// The partition was half-open at the gate: this send must win the probe first.
    half_open: bool,
    /// The breaker probe this send is, if it is one (its claim on the probe lapses then).
    probe: Option<Timestamp>,
    /// The subscriber's preferences as read after the claim: a death after the send hands
    /// on by them, with no storage call between the send and its outcome.
    prefs: Option<crate::domain::Preferences>,
}

impl<P: Ports> Consumer<P> {
    pub(super) async fn process(
        &self,
        inc: &Incoming,
        deadline: Option<Timestamp>,
        rng: &mut StdRng,
        m: &mut Metrics,
    ) -> Result<Action, PortError> {
        let mut in_flight = InFlight {
            consumer: self,
            inc,
            deadline,
            rng,
            m,
        };
        in_flight.run().await
    }
}

impl<P: Ports> InFlight<'_, P> {
    async fn run(&mut self) -> Result<Action, PortError> {
        let msg = step!(self.decode().await);
        let (delivery, lease) = match self.direct(msg).await? {
            direct::Direct::Done(action) => return Ok(action),
            direct::Direct::Claimed(claimed) => {
                let direct::Claimed {
                    delivery,
                    lease,
                    rules,
                } = *claimed;
                // Fresh at the claim, then the recipient's rules as read after it.
                let lease = step!(self.still_fresh(&delivery, lease).await);
                let lease = step!(self.apply_rules(&delivery, lease, rules).await);
                (delivery, lease)
            }
            direct::Direct::TwoReads(msg) => step!(self.two_reads(msg).await),
        };
        // Reading them took a storage call: the freshness check holds right before a send.
        let lease = step!(self.still_fresh(&delivery, lease).await);
        // A claim slowed by conflicts or storage may leave too little lease for a provider
        // call: sending then would let another worker take over mid-send. Give it back.
        if !self.lease_covers_send(&lease) {
            return self.release_unsent(&delivery, lease).await;
        }
        let mut lease = lease;
        if lease.half_open {
            match self.win_probe(&delivery).await {
                Some(probe_until) => lease.probe = Some(probe_until),
                // Another worker's probe decides: give the lease back, nothing spent.
                None => return self.release_unsent(&delivery, lease).await,
            }
            // The probe's write took time too.
            if !self.lease_covers_send(&lease) {
                return self.release_unsent(&delivery, lease).await;
            }
            // And the reminder may have gone stale, or its quiet hours begun, meanwhile.
            lease = step!(self.last_look(&delivery, lease).await);
        }
        let provider = self.consumer.ports.provider(self.inc.channel);
        let outcome = provider.send(&delivery.request).await;
        self.settle(&delivery, lease, outcome).await
    }

    /// Steps 1 to 3 for a message the one-read path did not take: the reminder read at
    /// intake, the claim, then the recipient's rules in a second read.
    async fn two_reads(&mut self, msg: DeliveryMessage) -> Step<(Delivery, Lease)> {
        let delivery = pass!(self.intake(msg).await);
        // A channel in standby behind another is sent only as a fallback.
        let delivery = pass!(self.standby(delivery).await);
        // SMS only to the allowed calling codes, before any claim.
        let delivery = pass!(self.country(delivery).await);
        // A claim, a send and its outcome must fit before the deadline; a Lambda timeout
        // would fail the whole batch. Released now, the message is back at once.
        let cfg = &self.consumer.cfg;
        let storage = crate::ports::STORAGE_OPERATION_TIMEOUT;
        if !self.time_left_for(storage + cfg.provider_timeout + storage) {
            return self.release_unclaimed().await.map(ControlFlow::Break);
        }
        // The suppression key before the claim: a slow or failing secret read holds no lease.
        let address = self.address_hash(&delivery).await?;
        let lease = pass!(self.claim(&delivery).await);
        // The claim may have taken conflict rounds or a slow write: freshness is checked
        // again right before the send, never only before the claim.
        let lease = pass!(self.still_fresh(&delivery, lease).await);
        // The recipient's rules, read after the claim: opt-outs, suppressions, quiet hours.
        let lease = pass!(self.recipient_rules(&delivery, lease, address).await);
        Ok(ControlFlow::Continue((delivery, lease)))
    }

    fn now(&self) -> Timestamp {
        self.consumer.ports.clock().now()
    }

    /// `Continue` while the claimed delivery is fresh by every clock within the margin
    /// ([`crate::domain::reminder::CLOCK_MARGIN`]); a stale one ends expired, and one too close
    /// to call gives its lease back (nothing spent) until it is surely stale.
    async fn still_fresh(&mut self, d: &Delivery, lease: Lease) -> Step<Lease> {
        use crate::domain::reminder::{freshness, Freshness};
        let action = match freshness(d.reminder.fresh_until, self.now()) {
            Freshness::Fresh => return Ok(ControlFlow::Continue(lease)),
            Freshness::Stale => self.expire_held(d, lease).await?,
            Freshness::Unsure { until } => {
                let why = (
                    "freshness_unsure",
                    "too close to fresh_until to call within the clock margin",
                );
                self.release_until(d, lease, until, why).await?
            }
        };
        Ok(ControlFlow::Break(action))
    }

    /// Whether what is left of the lease, and of the invocation, covers a send and the
    /// outcome's write (the rule cold start checks against the whole lease).
    fn lease_covers_send(&self, lease: &Lease) -> bool {
        let cfg = &self.consumer.cfg;
        let left = lease
            .record
            .lease_expires_at()
            .map_or(Duration::ZERO, |until| until.since(self.now()));
        let send_and_record = cfg.provider_timeout + crate::ports::STORAGE_OPERATION_TIMEOUT;
        cfg.lease_covers_send(left) && self.time_left_for(send_and_record)
    }

    /// Whether `work` fits before the invocation's deadline.
    fn time_left_for(&self, work: Duration) -> bool {
        self.deadline.is_none_or(|d| self.now().plus(work) <= d)
    }

    /// Not claimed, for want of time: visible again at once for the next invocation.
    async fn release_unclaimed(&mut self) -> Result<Action, PortError> {
        self.m.released += 1;
        let queue = self.consumer.ports.queue();
        queue
            .change_visibility(self.inc.channel, &self.inc.receipt_handle, 0)
            .await?;
        Ok(Action::Released)
    }

    /// The state machine's context: TTLs follow the reminder's freshness (one retention).
    fn ctx(&self, msg: &DeliveryMessage, fresh_until: Timestamp, now: Timestamp) -> Ctx {
        Ctx {
            key: msg.delivery_key.clone(),
            now,
            expires_at: self.consumer.cfg.retention.expires_at(fresh_until),
            origin: Some(crate::ledger::Origin::of(msg)),
        }
    }

    /// The context of a change to the item under `key` that does not make it (no origin):
    /// now, and kept as long as a reminder fresh until `fresh_until` is.
    fn ctx_of(&self, key: DeliveryKey, fresh_until: Timestamp) -> Ctx {
        Ctx {
            key,
            now: self.now(),
            expires_at: self.consumer.cfg.retention.expires_at(fresh_until),
            origin: None,
        }
    }

    fn idempotent(&self) -> bool {
        let provider = self.consumer.ports.provider(self.inc.channel);
        provider.honours_idempotency_key()
    }
}

fn class_name(class: OutcomeClass) -> &'static str {
    class.as_str()
}

/// The one structured line per transition (docs/design.md, "Observability"). No recipient, ever.
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
