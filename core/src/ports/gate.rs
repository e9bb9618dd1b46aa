//! The `Gate` port (docs/design.md, "Outages: the breaker" and "Provider gate"): per (channel,
//! provider partition), what every worker must know before calling the provider — the time until
//! which it is throttling, and its breaker. Items live in the deliveries table under the `gate#`
//! prefix, which no delivery key can take.
//!
//! The breaker: transient failures and timeouts in a row, across deliveries and workers, are
//! counted on the item ([`Gate::failed`]); a success resets the count. At the threshold the
//! partition opens: deliveries are held by visibility, with no provider call and no attempt
//! spent. After the cool-down one worker wins the probe by a conditional write (half-open);
//! its success closes the breaker, its failure reopens it with a longer cool-down, and a 429
//! (or a refusal of the whole partition) releases it with no reopening counted: the provider
//! answered, and the 429 gate holds the partition until its `Retry-After`. Every breaker write
//! is conditional ([`BreakerChange`]), so two workers never both open, both probe or reopen
//! over each other.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

use super::PortError;
use crate::clock::Timestamp;
use crate::domain::Channel;
use crate::sync::lock;

pub const OP_GET: &str = "gate.get";
pub const OP_THROTTLE: &str = "gate.throttle";
pub const OP_FAILED: &str = "gate.failed";
pub const OP_BREAKER: &str = "gate.breaker";

/// A provider partition: the unit a provider throttles (an account, a sender id, a host).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GatePartition {
    pub channel: Channel,
    pub name: String,
}

impl GatePartition {
    pub fn new(channel: Channel, name: impl Into<String>) -> Self {
        Self {
            channel,
            name: name.into(),
        }
    }

    /// The item key: `gate#<channel>#<name>`.
    pub fn item_key(&self) -> String {
        format!("{GATE_KEY_PREFIX}{}#{}", self.channel, self.name)
    }
}

/// What every gate item's key starts with, and no delivery key can.
pub const GATE_KEY_PREFIX: &str = "gate#";

/// An open breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenBreaker {
    /// When this outage began (kept across reopenings, for the "open too long" alarm).
    pub opened_at: Timestamp,
    /// End of the cool-down: no probe before.
    pub until: Timestamp,
    /// Failed probes since it opened (the cool-down doubles with each, to its cap).
    pub reopens: u32,
    /// A probe in flight, and when its claim on the probe lapses (its worker may have died).
    pub probe_until: Option<Timestamp>,
}

/// What the gate item says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GateState {
    /// When the partition takes requests again after a 429, if it is or was throttled.
    pub throttled_until: Option<Timestamp>,
    /// Transient failures and timeouts in a row, across deliveries (a success resets it),
    /// and when the run began.
    pub failures: u32,
    pub run_since: Option<Timestamp>,
    pub breaker: Option<OpenBreaker>,
}

/// A conditional breaker write; [`Gate::breaker`] answers whether it applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerChange {
    /// closed → open until `until`; refused when already open.
    Open { now: Timestamp, until: Timestamp },
    /// open, cool-down over, no live probe, and `reopens` failed probes as the caller read
    /// them → probing until `probe_until` (the probe's token). A caller whose copy of the
    /// count is stale loses the probe, so the probe that wins knows the stored count (its
    /// failure's cool-down follows it).
    Probe {
        now: Timestamp,
        probe_until: Timestamp,
        reopens: u32,
    },
    /// the probe `probe_until` failed → open again until `until`, one more reopening.
    Reopen {
        probe_until: Timestamp,
        until: Timestamp,
    },
    /// the probe `probe_until` was answered 429 or refused for the partition: the provider is
    /// up but shedding load → no probe in flight, the next one from `until` (its
    /// `Retry-After`), and no reopening counted (the cool-down does not double).
    Release {
        probe_until: Timestamp,
        until: Timestamp,
    },
    /// a success: closed, the failure count reset; refused when already closed at zero.
    Close,
}

impl BreakerChange {
    /// The pure rule every adapter applies: `state` after the change, or `None` if refused.
    pub fn apply(self, state: &GateState) -> Option<GateState> {
        let mut next = *state;
        match (self, state.breaker) {
            (BreakerChange::Open { now, until }, None) => {
                next.breaker = Some(OpenBreaker {
                    opened_at: now,
                    until,
                    reopens: 0,
                    probe_until: None,
                });
            }
            (
                BreakerChange::Probe {
                    now,
                    probe_until,
                    reopens,
                },
                Some(mut open),
            ) if open.until <= now
                && open.probe_until.is_none_or(|p| p <= now)
                && open.reopens == reopens =>
            {
                open.probe_until = Some(probe_until);
                next.breaker = Some(open);
            }
            (BreakerChange::Reopen { probe_until, until }, Some(mut open))
                if open.probe_until == Some(probe_until) =>
            {
                open.until = until;
                open.reopens += 1;
                open.probe_until = None;
                next.breaker = Some(open);
            }
            (BreakerChange::Release { probe_until, until }, Some(mut open))
                if open.probe_until == Some(probe_until) =>
            {
                open.until = until;
                open.probe_until = None;
                next.breaker = Some(open);
            }
            (BreakerChange::Close, b) if b.is_some() || state.failures > 0 => {
                next.failures = 0;
                next.run_since = None;
                next.breaker = None;
            }
            _ => return None,
        }
        Some(next)
    }
}

pub trait Gate: Send + Sync {
    /// The partition's gate item (all defaults when there is none).
    fn state(
        &self,
        partition: &GatePartition,
    ) -> impl Future<Output = Result<GateState, PortError>> + Send;

    /// Close the partition until `until`; never shortens a later closing.
    fn throttle(
        &self,
        partition: &GatePartition,
        until: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Count one more failure in a row (atomic; the run starts at `now` if none is going);
    /// answers the whole item after it, as written (strongly consistent).
    fn failed(
        &self,
        partition: &GatePartition,
        now: Timestamp,
    ) -> impl Future<Output = Result<GateState, PortError>> + Send;

    /// One conditional breaker write: whether it applied.
    fn breaker(
        &self,
        partition: &GatePartition,
        change: BreakerChange,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;
}

impl<T: Gate> Gate for std::sync::Arc<T> {
    fn state(
        &self,
        p: &GatePartition,
    ) -> impl Future<Output = Result<GateState, PortError>> + Send {
        (**self).state(p)
    }
    fn throttle(
        &self,
        p: &GatePartition,
        until: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).throttle(p, until)
    }
    fn failed(
        &self,
        p: &GatePartition,
        now: Timestamp,
    ) -> impl Future<Output = Result<GateState, PortError>> + Send {
        (**self).failed(p, now)
    }
    fn breaker(
        &self,
        p: &GatePartition,
        change: BreakerChange,
    ) -> impl Future<Output = Result<bool, PortError>> + Send {
        (**self).breaker(p, change)
    }
}

#[derive(Debug, Default)]
pub struct MemoryGate {
    items: Mutex<BTreeMap<GatePartition, GateState>>,
}

impl MemoryGate {
    /// The partition's item as it is, with no fault and no await (for checkers).
    pub fn peek(&self, p: &GatePartition) -> GateState {
        lock(&self.items).get(p).copied().unwrap_or_default()
    }

    /// Run `f` on the partition's item atomically.
    fn with_item<R>(&self, p: &GatePartition, f: impl FnOnce(&mut GateState) -> R) -> R {
        f(lock(&self.items).entry(p.clone()).or_default())
    }
}

impl Gate for MemoryGate {
    async fn state(&self, p: &GatePartition) -> Result<GateState, PortError> {
        Ok(self.with_item(p, |s| *s))
    }

    async fn throttle(&self, p: &GatePartition, until: Timestamp) -> Result<(), PortError> {
        self.with_item(p, |s| {
            s.throttled_until = Some(s.throttled_until.map_or(until, |u| u.max(until)));
        });
        Ok(())
    }

    async fn failed(&self, p: &GatePartition, now: Timestamp) -> Result<GateState, PortError> {
        Ok(self.with_item(p, |s| {
            s.failures = s.failures.saturating_add(1);
            s.run_since.get_or_insert(now);
            *s
        }))
    }

    async fn breaker(&self, p: &GatePartition, change: BreakerChange) -> Result<bool, PortError> {
        Ok(self.with_item(p, |s| match change.apply(s) {
            Some(next) => {
                *s = next;
                true
            }
            None => false,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn the_breaker_opens_once_probes_once_and_closes_on_a_success() {
        let closed = GateState::default();
        let open = BreakerChange::Open {
            now: t(0),
            until: t(100),
        };
        let s = open.apply(&closed).expect("a closed breaker opens");
        assert!(
            open.apply(&s).is_none(),
            "an open breaker does not open twice"
        );
        let probe = |now, until| BreakerChange::Probe {
            now: t(now),
            probe_until: t(until),
            reopens: 0,
        };
        assert!(
            probe(99, 200).apply(&s).is_none(),
            "no probe in the cool-down"
        );
        let probing = probe(100, 200).apply(&s).expect("the first probe wins");
        assert!(
            probe(150, 250).apply(&probing).is_none(),
            "one probe at a time"
        );
        let lapsed = probe(200, 300)
            .apply(&probing)
            .expect("a dead probe's claim lapses");
        let wrong = BreakerChange::Reopen {
            probe_until: t(200),
            until: t(400),
        };
        assert!(
            wrong.apply(&lapsed).is_none(),
            "a lapsed probe cannot reopen"
        );
        let reopened = BreakerChange::Reopen {
            probe_until: t(300),
            until: t(400),
        }
        .apply(&lapsed)
        .unwrap();
        let b = reopened.breaker.unwrap();
        assert_eq!((b.until, b.reopens, b.opened_at), (t(400), 1, t(0)));
        assert!(
            probe(400, 500).apply(&reopened).is_none(),
            "a probe read at a stale count of failed probes loses"
        );
        let probing = BreakerChange::Probe {
            now: t(400),
            probe_until: t(500),
            reopens: 1,
        }
        .apply(&reopened)
        .expect("a probe at the stored count wins");
        let release = |probe_until| BreakerChange::Release {
            probe_until: t(probe_until),
            until: t(900),
        };
        assert!(
            release(499).apply(&probing).is_none(),
            "fenced by the probe"
        );
        let released = release(500).apply(&probing).unwrap().breaker.unwrap();
        assert_eq!(
            (released.until, released.reopens, released.probe_until),
            (t(900), 1, None),
            "a probe answered 429 counts no reopening"
        );
        let shut = BreakerChange::Close
            .apply(&GateState {
                failures: 3,
                run_since: Some(t(1)),
                ..reopened
            })
            .unwrap();
        assert_eq!(shut, GateState::default());
        assert!(BreakerChange::Close.apply(&shut).is_none());
    }
}
