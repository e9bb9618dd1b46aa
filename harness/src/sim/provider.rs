//! A simulated provider with a failure profile: per-channel throughput (a token bucket that
//! answers 429 with Retry-After when empty), random 429s, 5xx, timeouts (accepted-then-lost
//! half of the time) and permanent rejects, and an outage window of 503s. Deterministic for a
//! given seed and call order; counts what the recipient would have seen per key.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Deserialize;

use reminders_core::clock::{Clock, Timestamp};
use reminders_core::domain::{Channel, DeliveryKey, PerChannel};
use reminders_core::policy::Outcome;
use reminders_core::ports::{GatePartition, Provider, SendRequest};

use super::seed::Stream;

/// What can go wrong, and how fast the provider is.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Profile {
    /// Sends per second each channel's provider accepts (beyond: 429 + Retry-After).
    pub push_per_sec: f64,
    pub email_per_sec: f64,
    pub sms_per_sec: f64,
    pub rate_429: f64,
    pub retry_after_secs: u64,
    pub rate_5xx: f64,
    /// Timeouts after the request was written; half of them were accepted.
    pub rate_timeout: f64,
    /// Only a delivery's first attempt can time out (the planner's "first wave").
    pub timeout_first_attempt_only: bool,
    pub rate_permanent: f64,
    /// An outage (503s) of `outage_secs` starting `outage_start_secs` into the run.
    pub outage_start_secs: Option<u64>,
    pub outage_secs: u64,
    /// The channel the outage hits (all when absent).
    pub outage_channel: Option<Channel>,
    pub idempotent: bool,
}

impl Default for Profile {
    fn default() -> Self {
        Self {
            push_per_sec: 40.0,
            email_per_sec: 30.0,
            sms_per_sec: 20.0,
            rate_429: 0.02,
            retry_after_secs: 5,
            rate_5xx: 0.02,
            rate_timeout: 0.01,
            timeout_first_attempt_only: false,
            rate_permanent: 0.005,
            outage_start_secs: Some(600),
            outage_secs: 300,
            outage_channel: Some(Channel::Sms),
            idempotent: true,
        }
    }
}

impl Profile {
    pub fn per_sec(&self, channel: Channel) -> f64 {
        match channel {
            Channel::Push => self.push_per_sec,
            Channel::Email => self.email_per_sec,
            Channel::Sms => self.sms_per_sec,
        }
    }
}

struct Bucket {
    tokens: f64,
    at: Timestamp,
}

/// What the provider saw of one key: counts up to two, all a duplicate needs.
#[derive(Default, Clone, Copy)]
struct Tally {
    /// Every accepted call, repeats under one key included.
    accepted: u8,
    /// Calls answered "delivered": the system was told, so a second is a resend it knew not
    /// to make, whatever the provider's deduplication hides.
    confirmed: u8,
}

impl Tally {
    /// Keys sent again after the provider confirmed them, or accepted twice by a provider
    /// that ignores idempotency keys (the recipient saw it twice). Counted from acceptances,
    /// not distinct keys: with an idempotent provider a resend after a confirmation counts.
    fn duplicate(self, idempotent: bool) -> bool {
        self.confirmed > 1 || (!idempotent && self.accepted > 1)
    }
}

struct State {
    rng: StdRng,
    buckets: PerChannel<Bucket>,
    /// By key, from its first call (a key the embedded pipeline sends: a million in the 1M
    /// demo, so counts, not calls, and no order: only totals are read).
    tally: HashMap<Box<str>, Tally>,
    calls: u64,
    duplicates: u64,
    /// Calls answered 429 because the channel's throughput was spent (the planner's stage
    /// report reads them each second).
    over_throughput: u64,
}

pub struct SimProvider<C> {
    clock: C,
    profile: Profile,
    start: Timestamp,
    state: Mutex<State>,
}

impl<C: Clock> SimProvider<C> {
    /// Answering by `profile`, drawn from the simulation seeded with `seed` (its stream
    /// [`Stream::Provider`]).
    pub fn new(clock: C, profile: Profile, seed: u64) -> Self {
        let start = clock.now();
        let buckets = PerChannel::from_fn(|c| Bucket {
            tokens: profile.per_sec(c),
            at: start,
        });
        Self {
            clock,
            profile,
            start,
            state: Mutex::new(State {
                rng: StdRng::seed_from_u64(Stream::Provider.of(seed)),
                buckets,
                tally: HashMap::new(),
                calls: 0,
                duplicates: 0,
                over_throughput: 0,
            }),
        }
    }

    pub fn calls(&self) -> u64 {
        self.lock().calls
    }

    /// Calls answered 429 because the channel's throughput was spent.
    pub fn over_throughput(&self) -> u64 {
        self.lock().over_throughput
    }

    /// Keys the recipient saw twice, or sent again after a confirmation ([`Tally::duplicate`]).
    pub fn duplicates(&self) -> u64 {
        self.lock().duplicates
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn answer(&self, request: &SendRequest) -> Outcome {
        let now = self.clock.now();
        let channel = request.recipient.channel();
        let mut st = self.lock();
        let key = request.delivery_key.as_str();
        let first = !st.tally.contains_key(key);
        if first {
            st.tally.insert(key.into(), Tally::default());
        }
        st.calls += 1;
        if self.in_outage(now, channel) {
            return Outcome::Transient {
                error: "http_503".into(),
            };
        }
        // Throughput: refill, then take a token or answer 429 with the wait for the next.
        let rate = self.profile.per_sec(channel).max(0.001);
        let bucket = st.buckets.get_mut(channel);
        let elapsed = now.since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate.max(1.0));
        bucket.at = now;
        if bucket.tokens < 1.0 {
            let wait = ((1.0 - bucket.tokens) / rate).ceil().max(1.0) as u64;
            st.over_throughput += 1;
            return Outcome::Throttled {
                retry_after: Some(now.plus(Duration::from_secs(wait))),
            };
        }
        bucket.tokens -= 1.0;
        self.roll(&mut st, request, first, now)
    }

    fn in_outage(&self, now: Timestamp, channel: Channel) -> bool {
        let p = &self.profile;
        p.outage_start_secs.is_some_and(|s| {
            let from = self.start.plus(Duration::from_secs(s));
            now >= from && now < from.plus(Duration::from_secs(p.outage_secs))
        }) && p.outage_channel.is_none_or(|c| c == channel)
    }

    /// The failure profile's dice, for a call the provider had capacity for.
    fn roll(&self, st: &mut State, request: &SendRequest, first: bool, now: Timestamp) -> Outcome {
        let p = &self.profile;
        let roll: f64 = st.rng.random();
        let mut edge = p.rate_429;
        if roll < edge {
            return Outcome::Throttled {
                retry_after: Some(now.plus(Duration::from_secs(p.retry_after_secs))),
            };
        }
        edge += p.rate_5xx;
        if roll < edge {
            return Outcome::Transient {
                error: "http_503".into(),
            };
        }
        edge += p.rate_permanent;
        if roll < edge {
            return Outcome::Permanent {
                error: "http_400".into(),
            };
        }
        edge += p.rate_timeout;
        if roll < edge && (first || !p.timeout_first_attempt_only) {
            if st.rng.random_bool(0.5) {
                self.accept(st, &request.delivery_key);
            }
            return Outcome::Ambiguous {
                error: "timeout_after_write".into(),
            };
        }
        self.accept(st, &request.delivery_key);
        self.count(st, &request.delivery_key, |t| {
            t.confirmed = t.confirmed.saturating_add(1)
        });
        Outcome::Delivered {
            receipt: Some(format!("sim-{}", request.delivery_key)),
        }
    }

    fn accept(&self, st: &mut State, key: &DeliveryKey) {
        self.count(st, key, |t| t.accepted = t.accepted.saturating_add(1));
    }

    /// Change a key's tally (made by its first call), counting it once when it turns into a
    /// duplicate.
    fn count(&self, st: &mut State, key: &DeliveryKey, change: impl FnOnce(&mut Tally)) {
        let idempotent = self.profile.idempotent;
        let Some(t) = st.tally.get_mut(key.as_str()) else {
            return;
        };
        let was = t.duplicate(idempotent);
        change(t);
        if !was && t.duplicate(idempotent) {
            st.duplicates += 1;
        }
    }
}

impl<C: Clock> Provider for SimProvider<C> {
    fn honours_idempotency_key(&self) -> bool {
        self.profile.idempotent
    }

    fn partition(&self, channel: Channel) -> GatePartition {
        GatePartition::new(channel, "sim")
    }

    async fn send(&self, request: &SendRequest) -> Outcome {
        self.answer(request)
    }
}
