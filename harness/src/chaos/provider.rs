//! The provider as the checker sees it: every call is journalled when it starts, and the
//! provider misbehaves from the world's dice — 429 with a Retry-After, 5xx, a permanent
//! reject, accepting and then dropping the connection, or accepting only after the caller's
//! timeout (later than a lease), and an outage window of 503s. Acceptances are counted as they
//! happen, duplicates included: what the recipient would see without deduplication.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::dice::Dice;
use super::journal::Journal;
use super::{Plant, VirtualClock};
use reminders_core::clock::{Clock, Timestamp};
use reminders_core::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};
use reminders_core::policy::Outcome;
use reminders_core::ports::{
    GatePartition, MemoryReminderStore, Provider, ReminderStore, SendRequest,
};

/// Addresses (a subscriber's channel) the provider answers `503` while faults strike.
pub(super) type Failing =
    Arc<std::sync::Mutex<std::collections::BTreeSet<(SubscriberId, Channel)>>>;

/// Per-call probabilities of each misbehaviour.
#[derive(Debug, Clone, Copy, Default)]
pub struct Misbehaviour {
    pub throttle: f64,
    pub transient: f64,
    pub permanent: f64,
    /// Accepted, then the connection dropped before the answer.
    pub accept_then_drop: f64,
    /// Accepted only after the caller gave up (past its timeout, possibly past the lease).
    pub slow: f64,
    /// `410 Gone`: the address is dead (the consumer suppresses it).
    pub gone: f64,
}

pub struct ChaosProvider {
    pub idempotent: bool,
    pub dice: Arc<Dice>,
    pub journal: Arc<Journal>,
    pub clock: VirtualClock,
    pub store: Arc<MemoryReminderStore>,
    /// Which reminder each delivery key belongs to.
    pub owners: Arc<std::sync::Mutex<BTreeMap<DeliveryKey, ReminderId>>>,
    pub misbehaviour: Misbehaviour,
    pub outage: (Timestamp, Timestamp),
    /// The adapter's own request timeout.
    pub timeout: Duration,
    pub plant: Option<Plant>,
    /// Whether an address whose attempt was ambiguous is dead at its next attempt (a number
    /// ported away just then): the death that follows an attempt that may have reached the
    /// person, where a dead address meets an ambiguous attempt. Half the worlds.
    pub gone_after_ambiguous: bool,
    /// The keys whose next attempt answers `410`.
    pub doomed: std::sync::Mutex<std::collections::BTreeSet<DeliveryKey>>,
    /// Told of some accepted sends, whose worker then stops before it hears the answer: the
    /// application moves the reminder past the ledger's horizon meanwhile.
    pub accepted: Option<super::prompt::Prompter>,
    /// Addresses answered `503` while faults strike, until the operator fixes them (heads that die
    /// out of budget).
    pub failing: Failing,
}

impl ChaosProvider {
    /// The key's reminder as stored: when it is fresh until, and whose it is.
    async fn owner(&self, key: &DeliveryKey) -> (Timestamp, Option<SubscriberId>) {
        let never = (Timestamp::from_millis(i64::MIN), None);
        let owner = reminders_core::sync::lock(&self.owners).get(key).cloned();
        let Some(id) = owner else {
            return never;
        };
        match self.store.get(&id).await {
            Ok(Some(r)) => (r.fresh_until, Some(r.subscriber_id)),
            _ => never,
        }
    }

    fn strikes(&self, p: f64) -> bool {
        if self.dice.is_calm() || p <= 0.0 || self.dice.unit() >= p {
            return false;
        }
        self.dice.count();
        true
    }

    /// A 429 whose Retry-After is delta-seconds or an HTTP date, from 1 s to 10 min (outside
    /// the usual 10 to 120 s too), read by the real parser. The journal keeps what the provider
    /// said, to the second, whatever the system makes of it.
    fn throttle(&self, key: &DeliveryKey, now: Timestamp) -> Outcome {
        let secs = match self.dice.range(0, 4) {
            0 => self.dice.range(1, 10),
            1 => self.dice.range(121, 600),
            _ => self.dice.range(10, 120),
        };
        let whole = Timestamp::from_millis(now.as_millis().div_euclid(1000) * 1000);
        let until = whole.plus(Duration::from_secs(secs + 1));
        self.journal.throttled(key, until);
        let header = if self.dice.range(0, 2) == 0 {
            until.since(now).as_secs_f64().ceil().to_string()
        } else {
            let at = std::time::UNIX_EPOCH
                + Duration::from_millis(u64::try_from(until.as_millis()).unwrap_or(0));
            httpdate::fmt_http_date(at)
        };
        let retry_after = match self.plant {
            Some(Plant::IgnoreRetryAfter) => None,
            _ => reminders_core::policy::parse_retry_after(&header, now),
        };
        Outcome::Throttled { retry_after }
    }

    /// Accepted once the caller has given up: the acceptance happens whatever becomes of it.
    async fn slow(&self, key: &DeliveryKey) -> Outcome {
        let late = Duration::from_secs(self.dice.range(self.timeout.as_secs() + 1, 150));
        let journal = self.journal.clone();
        let key = key.clone();
        tokio::task::spawn_local(async move {
            tokio::time::sleep(late).await;
            journal.accepted(&key);
        });
        tokio::time::sleep(self.timeout).await;
        Outcome::Ambiguous {
            error: "chaos: timed out after writing the request".into(),
        }
    }
}

impl ChaosProvider {
    /// Whether the key's reminder lists another channel (one that can stand by): only those
    /// heads are failed in the worlds where heads die out of budget, so the rest keep being
    /// delivered.
    async fn lists_more(&self, key: &DeliveryKey) -> bool {
        let owner = reminders_core::sync::lock(&self.owners).get(key).cloned();
        match owner {
            Some(id) => matches!(self.store.get(&id).await, Ok(Some(r)) if r.recipients.len() > 1),
            None => false,
        }
    }

    fn doom(&self, key: &DeliveryKey) {
        if self.gone_after_ambiguous {
            reminders_core::sync::lock(&self.doomed).insert(key.clone());
        }
    }
}

impl Provider for ChaosProvider {
    fn honours_idempotency_key(&self) -> bool {
        self.idempotent
    }

    fn partition(&self, channel: Channel) -> GatePartition {
        GatePartition::new(channel, super::journal::PARTITION)
    }

    async fn send(&self, request: &SendRequest) -> Outcome {
        // The call is made now, whatever a planted clock told the consumer.
        super::dice::freeze(None);
        let key = &request.delivery_key;
        let now = self.clock.now();
        let (fresh_until, subscriber) = self.owner(key).await;
        let channel = request.recipient.channel();
        // The deployed allow-list, whatever the consumer under test was configured with.
        let allowed = reminders_core::domain::SmsCountries::default();
        if channel == reminders_core::domain::Channel::Sms
            && !allowed.allows(request.recipient.expose())
        {
            self.journal.sent_abroad(key);
        }
        let n = self
            .journal
            .send_started(key, channel, subscriber.as_ref(), now, fresh_until);
        let outcome = self.answer(request, now, subscriber.as_ref()).await;
        let refused = matches!(
            outcome,
            Outcome::Throttled { .. }
                | Outcome::Transient { .. }
                | Outcome::Permanent { .. }
                | Outcome::Gone { .. }
        );
        if matches!(outcome, Outcome::Gone { .. }) {
            self.journal.gone(subscriber.as_ref(), channel);
        }
        self.journal.answered(key, n, !refused);
        outcome
    }
}

impl ChaosProvider {
    async fn answer(
        &self,
        request: &SendRequest,
        now: Timestamp,
        subscriber: Option<&SubscriberId>,
    ) -> Outcome {
        let key = &request.delivery_key;
        tokio::time::sleep(Duration::from_millis(self.dice.range(20, 800))).await;
        let channel = request.recipient.channel();
        let failing = subscriber.is_some_and(|s| {
            reminders_core::sync::lock(&self.failing).contains(&(s.clone(), channel))
        });
        if failing && !self.dice.is_calm() && self.lists_more(key).await {
            // A definite failure: nothing was sent.
            self.journal.attempt(key);
            self.journal.failed(key, channel);
            return Outcome::Transient {
                error: "http_503".into(),
            };
        }
        let m = self.misbehaviour;
        if self.strikes(m.throttle) {
            return self.throttle(key, now);
        }
        self.journal.attempt(key);
        let doomed = reminders_core::sync::lock(&self.doomed).remove(key);
        if doomed && !self.dice.is_calm() {
            self.journal.permanent(key);
            return Outcome::Gone {
                error: "http_410".into(),
                source: reminders_core::domain::SuppressionSource::Http410,
            };
        }
        let in_outage = now >= self.outage.0 && now < self.outage.1 && !self.dice.is_calm();
        if in_outage || self.strikes(m.transient) {
            self.journal.failed(key, request.recipient.channel());
            if self.plant == Some(Plant::FiveXxPermanent) {
                return Outcome::Permanent {
                    error: "http_503".into(),
                };
            }
            return Outcome::Transient {
                error: "http_503".into(),
            };
        }
        if self.strikes(m.permanent) {
            self.journal.permanent(key);
            return Outcome::Permanent {
                error: "http_400".into(),
            };
        }
        if self.strikes(m.gone) {
            self.journal.permanent(key);
            return Outcome::Gone {
                error: "http_410".into(),
                source: reminders_core::domain::SuppressionSource::Http410,
            };
        }
        if self.strikes(m.slow) {
            self.doom(key);
            return self.slow(key).await;
        }
        self.journal.accepted(key);
        if self.accepted.is_some() && self.strikes(0.2) {
            let owner = reminders_core::sync::lock(&self.owners).get(key).cloned();
            if let Some(id) = owner {
                let what = super::prompt::Prompt::Accepted(id);
                super::prompt::prompt(self.accepted.as_ref(), what).await;
                super::dice::crash().await;
            }
        }
        if self.strikes(m.accept_then_drop) {
            self.doom(key);
            return Outcome::Ambiguous {
                error: "chaos: connection reset after the provider accepted".into(),
            };
        }
        Outcome::Delivered {
            receipt: Some(format!("chaos-{key}")),
        }
    }
}
