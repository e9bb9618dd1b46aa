//! The one delivery the model checks, and the consumer's configuration for it: a discrete
//! clock (one tick is ten seconds), a one-tick lease, and a retry policy small enough that the
//! budget runs out within a few sends.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use reminders::clock::Timestamp;
use reminders::consumer::ConsumerConfig;
use reminders::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};
use reminders::ledger::{Ctx, DeliveryRecord, LeaseToken};
use reminders::policy::{AmbiguousRule, Backoff, RetryPolicy};

/// Tick 0 of the model's clock.
const T0_MS: i64 = 1_700_000_000_000;
/// One tick of the model's clock: the lease, and longer than the provider timeout plus a
/// storage call, so a fresh lease covers a send (`ConsumerConfig::lease_covers_send`).
pub const TICK: Duration = Duration::from_secs(10);
/// The consumer's lease, in ticks.
pub const LEASE_TICKS: u8 = 1;
/// Provider attempts a delivery may spend (per redrive).
pub const MAX_ATTEMPTS: u32 = 2;
/// TTL written with every transition (no behaviour depends on it).
const EXPIRES_AT: i64 = 1_800_000_000;

pub fn at(tick: u8) -> Timestamp {
    Timestamp::from_millis(T0_MS).plus(TICK * u32::from(tick))
}

/// The reminder's freshness: halfway through tick `tick` (stale from the next tick on), or far
/// beyond the model's clock.
pub fn fresh_until(tick: Option<u8>) -> Timestamp {
    tick.map_or(at(0).plus(Duration::from_secs(24 * 3600)), |t| {
        at(t).plus(TICK / 2)
    })
}

/// The consumer's configuration: the model's lease, a one-second provider timeout, its policy.
pub fn consumer() -> &'static ConsumerConfig {
    static CFG: OnceLock<ConsumerConfig> = OnceLock::new();
    CFG.get_or_init(|| ConsumerConfig {
        policy: policy(),
        lease: TICK * u32::from(LEASE_TICKS),
        provider_timeout: Duration::from_secs(1),
        ..ConsumerConfig::default()
    })
}

pub fn key() -> DeliveryKey {
    static KEY: OnceLock<DeliveryKey> = OnceLock::new();
    KEY.get_or_init(|| {
        let reminder = ReminderId::parse("r-model").expect("reminder id");
        let subscriber = SubscriberId::parse("s-model").expect("subscriber id");
        DeliveryKey::derive(&reminder, &subscriber, Channel::Email)
    })
    .clone()
}

/// The state machine's context for a write decided at `tick`.
pub fn ctx(tick: u8) -> Ctx {
    Ctx {
        key: key(),
        now: at(tick),
        expires_at: EXPIRES_AT,
        origin: None,
    }
}

/// A lease token with a readable name (real tokens are random; the model only needs them to
/// be distinct, see `State::fresh_token`).
pub fn token(name: &str) -> LeaseToken {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).expect("token")
}

/// The consumer's policy: no backoff (a retry or a takeover is eligible at once), two
/// attempts, the ambiguous rule that resends only through an idempotent provider.
pub fn policy() -> RetryPolicy {
    RetryPolicy {
        version: "model".into(),
        max_attempts: MAX_ATTEMPTS,
        backoff: Backoff::Schedule {
            schedule_secs: vec![0],
        },
        freshness_default_secs: 3600,
        max_throttle_deferrals: 1,
        throttle_base_secs: 1,
        throttle_cap_secs: 1,
        ambiguous: AmbiguousRule::RetryIfIdempotent,
    }
}

/// The policy's random source (unused by a schedule backoff, but `decide` asks for one).
pub fn rng() -> StdRng {
    StdRng::seed_from_u64(7)
}

/// A ledger record as the model keeps it: shared, since states are cloned at every step and
/// a record never changes.
pub type Rec = Arc<DeliveryRecord>;
