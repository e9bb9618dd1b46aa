//! A provider that answers from a script, for the tests and the benchmarks, and counts what a
//! real provider would have done with each idempotency key. (The simulation's provider answers
//! from its failure profile, `sim::provider`; the chaos worlds' from their dice.)

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use reminders_core::clock::Clock;
use reminders_core::domain::{Channel, DeliveryKey};
use reminders_core::policy::{parse_retry_after, Outcome};
use reminders_core::ports::gate::GatePartition;
use reminders_core::ports::{Provider, SendRequest};
use reminders_core::sync::lock;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Accepted, with this receipt (or a generated one).
    Deliver {
        receipt: Option<String>,
    },
    /// 429 with `Retry-After: <secs>`.
    ThrottleSecs(u64),
    /// 429 with `Retry-After: <HTTP-date>`, `secs` from now.
    ThrottleHttpDate(u64),
    /// 429 without Retry-After.
    Throttle,
    Transient,
    Permanent,
    /// `410 Gone`: permanent, and the address is dead (suppressed).
    Gone,
    /// The provider accepted it, but the caller sees a timeout after the request was written.
    AcceptedThenLost,
    /// Accepted after `Duration` (on the provider's clock: virtual under a `ManualClock`).
    SlowDeliver(Duration),
    /// The provider code panics (a bug in an adapter): must fail one record only.
    Panic,
}

#[derive(Debug, Default)]
struct Tally {
    calls: u32,
    /// The payload version of each call.
    versions: Vec<u64>,
    /// Sends the recipient would have seen: with an idempotent provider, repeated accepted
    /// calls with one key count once.
    accepted: u32,
    /// Every call the provider accepted, repeats with one key included: what this code did,
    /// before the provider's deduplication hid it.
    acceptances: u32,
}

/// A provider that answers from a script — per key first, then a shared queue, then
/// `Deliver` — and counts calls and accepted sends per idempotency key.
#[derive(Debug)]
pub struct ScriptedProvider<C> {
    clock: C,
    idempotent: bool,
    partition: String,
    shared: Mutex<VecDeque<Answer>>,
    per_key: Mutex<BTreeMap<DeliveryKey, VecDeque<Answer>>>,
    tally: Mutex<BTreeMap<DeliveryKey, Tally>>,
}

impl<C: Clock> ScriptedProvider<C> {
    pub fn new(clock: C, idempotent: bool) -> Self {
        Self {
            clock,
            idempotent,
            partition: "scripted".into(),
            shared: Mutex::default(),
            per_key: Mutex::default(),
            tally: Mutex::default(),
        }
    }

    /// Answers for the next calls, any key, in order.
    pub fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        lock(&self.shared).extend(answers);
    }

    /// Answers for the next calls with this key, before the shared script.
    pub fn script_for(&self, key: &DeliveryKey, answers: impl IntoIterator<Item = Answer>) {
        lock(&self.per_key)
            .entry(key.clone())
            .or_default()
            .extend(answers);
    }

    pub fn calls_for(&self, key: &DeliveryKey) -> u32 {
        lock(&self.tally).get(key).map_or(0, |t| t.calls)
    }

    /// What the recipient saw for this key.
    pub fn sends_for(&self, key: &DeliveryKey) -> u32 {
        lock(&self.tally).get(key).map_or(0, |t| t.accepted)
    }

    /// Every accepted call with this key, repeats included (an idempotent provider's
    /// deduplication does not hide them here).
    pub fn acceptances_for(&self, key: &DeliveryKey) -> u32 {
        lock(&self.tally).get(key).map_or(0, |t| t.acceptances)
    }

    /// The payload version sent by each call with this key, in order.
    pub fn versions_for(&self, key: &DeliveryKey) -> Vec<u64> {
        lock(&self.tally)
            .get(key)
            .map_or_else(Vec::new, |t| t.versions.clone())
    }

    pub fn total_calls(&self) -> u32 {
        lock(&self.tally).values().map(|t| t.calls).sum()
    }

    /// Keys the recipient saw more than once.
    pub fn duplicates(&self) -> Vec<DeliveryKey> {
        lock(&self.tally)
            .iter()
            .filter(|(_, t)| t.accepted > 1)
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn next_answer(&self, key: &DeliveryKey) -> Answer {
        if let Some(a) = lock(&self.per_key)
            .get_mut(key)
            .and_then(VecDeque::pop_front)
        {
            return a;
        }
        lock(&self.shared)
            .pop_front()
            .unwrap_or(Answer::Deliver { receipt: None })
    }

    fn accept(&self, key: &DeliveryKey) {
        let mut tally = lock(&self.tally);
        let t = tally.entry(key.clone()).or_default();
        t.acceptances += 1;
        if !(self.idempotent && t.accepted > 0) {
            t.accepted += 1;
        }
    }
}

impl<C: Clock> Provider for ScriptedProvider<C> {
    fn honours_idempotency_key(&self) -> bool {
        self.idempotent
    }

    fn partition(&self, channel: Channel) -> GatePartition {
        GatePartition::new(channel, self.partition.clone())
    }

    async fn send(&self, request: &SendRequest) -> Outcome {
        let key = &request.delivery_key;
        {
            let mut tally = lock(&self.tally);
            let t = tally.entry(key.clone()).or_default();
            t.calls += 1;
            t.versions.push(request.payload_version);
        }
        let now = self.clock.now();
        let delivered = |receipt: Option<String>| Outcome::Delivered {
            receipt: receipt.or_else(|| Some(format!("scripted-{key}"))),
        };
        match self.next_answer(key) {
            Answer::Deliver { receipt } => {
                self.accept(key);
                delivered(receipt)
            }
            Answer::SlowDeliver(d) => {
                self.clock.sleep(d).await;
                self.accept(key);
                delivered(None)
            }
            Answer::AcceptedThenLost => {
                self.accept(key);
                Outcome::Ambiguous {
                    error: "timeout_after_write".into(),
                }
            }
            Answer::ThrottleSecs(s) => Outcome::Throttled {
                retry_after: parse_retry_after(&s.to_string(), now),
            },
            Answer::ThrottleHttpDate(s) => {
                let at = std::time::UNIX_EPOCH
                    + Duration::from_millis(now.as_millis().max(0) as u64)
                    + Duration::from_secs(s + 1);
                Outcome::Throttled {
                    retry_after: parse_retry_after(&httpdate::fmt_http_date(at), now),
                }
            }
            Answer::Throttle => Outcome::Throttled { retry_after: None },
            Answer::Transient => Outcome::Transient {
                error: "http_503".into(),
            },
            Answer::Permanent => Outcome::Permanent {
                error: "invalid_recipient".into(),
            },
            Answer::Gone => Outcome::Gone {
                error: "http_410".into(),
                source: reminders_core::domain::SuppressionSource::Http410,
            },
            Answer::Panic => panic!("scripted provider panic"),
        }
    }
}
