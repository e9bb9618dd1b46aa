//! Faults at every port call, drawn from one seeded source ([`Dice`]): latency, a failure
//! before the effect, a throttle, a crash of the invocation before or after the effect, and a
//! lost response after it; [`invoke`] runs an invocation that a crash can stop at any of its
//! port calls. Each adapter's model ([`super::adapter::Adapter`]) draws them around its calls.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::sync::Notify;

use reminders_core::clock::Timestamp;
use reminders_core::ports::PortError;

/// How often each fault strikes a port call (probabilities per call).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    pub latency: f64,
    pub fail_before: f64,
    pub throttle: f64,
    pub crash: f64,
    pub lost_response: f64,
    /// A received message is delivered a second time (SQS is at least once).
    pub duplicate: f64,
}

/// The one random source of a world's faults, and their count.
pub struct Dice {
    rng: Mutex<StdRng>,
    rates: Mutex<Rates>,
    calm: AtomicBool,
    injected: AtomicU64,
    /// For plants that strike once a world.
    struck: AtomicBool,
    /// Conditional writes applied whose answer was lost and that the SDK sent again, and the
    /// draws that decide them (their own, so that the other faults of a world stay as they were
    /// until a retry's backoff moves its timing).
    retried: AtomicU64,
    retries: Mutex<StdRng>,
    /// Series writes that evicted the oldest occurrences made, and their own draws.
    evicted: AtomicU64,
    evictions: Mutex<StdRng>,
}

impl Dice {
    pub fn new(seed: u64, rates: Rates) -> Self {
        Self {
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            rates: Mutex::new(rates),
            calm: AtomicBool::new(false),
            injected: AtomicU64::new(0),
            struck: AtomicBool::new(false),
            retried: AtomicU64::new(0),
            retries: Mutex::new(StdRng::seed_from_u64(seed ^ 0x5d4_7e7d)),
            evicted: AtomicU64::new(0),
            evictions: Mutex::new(StdRng::seed_from_u64(seed ^ 0x0e71_c7ed)),
        }
    }

    /// Whether a series write drops the oldest occurrences it made from `made`, as one with
    /// thousands made does (`MADE_KEPT`): a fifth of the writes.
    pub fn evicts_made(&self) -> bool {
        let mut rng = reminders_core::sync::lock(&self.evictions);
        rng.random_range(0..5) == 0
    }

    /// Count a series write that dropped occurrences from `made`.
    pub fn evicted(&self) {
        self.evicted.fetch_add(1, Ordering::SeqCst);
    }

    /// How many series writes [`Dice::evicts_made`] trimmed.
    pub fn made_evicted(&self) -> u64 {
        self.evicted.load(Ordering::SeqCst)
    }

    /// Whether the answer of a write that took effect is lost on its way back and the SDK sends
    /// the same request again (its standard retry of a timeout or a reset connection): as often
    /// as a lost response, which is otherwise an error the caller sees.
    pub fn retries_write(&self) -> bool {
        if self.is_calm() {
            return false;
        }
        let p = reminders_core::sync::lock(&self.rates).lost_response;
        let mut rng = reminders_core::sync::lock(&self.retries);
        let hit = p > 0.0 && rng.random::<f64>() < p;
        if hit {
            self.count();
            self.retried.fetch_add(1, Ordering::SeqCst);
        }
        hit
    }

    /// How many writes [`Dice::retries_write`] sent again.
    pub fn writes_retried(&self) -> u64 {
        self.retried.load(Ordering::SeqCst)
    }

    /// The SDK's backoff before it sends a request again: what other writers do meanwhile is
    /// what the retried write then meets.
    pub async fn backoff(&self) {
        let ms = reminders_core::sync::lock(&self.retries).random_range(20..3_000);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    /// Stop injecting: the world must then converge.
    pub fn calm(&self) {
        self.calm.store(true, Ordering::SeqCst);
    }

    pub fn is_calm(&self) -> bool {
        self.calm.load(Ordering::SeqCst)
    }

    /// False the first time it is asked in a world, true after (a plant that strikes once).
    pub fn once(&self) -> bool {
        self.struck.swap(true, Ordering::SeqCst)
    }

    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    pub fn count(&self) {
        self.injected.fetch_add(1, Ordering::SeqCst);
    }

    /// A fair draw in `[0, 1)`, whatever the calm.
    pub fn unit(&self) -> f64 {
        reminders_core::sync::lock(&self.rng).random()
    }

    pub fn range(&self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        reminders_core::sync::lock(&self.rng).random_range(lo..hi)
    }

    /// Whether a fault with this rate strikes now (never once calm); counted when it does.
    pub fn strikes(&self, rate: impl Fn(&Rates) -> f64) -> bool {
        if self.is_calm() {
            return false;
        }
        let p = rate(&reminders_core::sync::lock(&self.rates));
        let hit = p > 0.0 && self.unit() < p;
        if hit {
            self.count();
        }
        hit
    }

    async fn before(&self, op: &'static str) -> Result<(), PortError> {
        if self.strikes(|r| r.latency) {
            tokio::time::sleep(Duration::from_millis(self.range(100, 4_000))).await;
        }
        self.may_crash().await;
        if self.strikes(|r| r.fail_before) {
            return Err(unavailable(op, "chaos: failed before the effect"));
        }
        if self.strikes(|r| r.throttle) {
            return Err(PortError::Throttled {
                op,
                message: "chaos: throttled".into(),
            });
        }
        Ok(())
    }

    async fn after(&self, op: &'static str) -> Result<(), PortError> {
        self.may_crash().await;
        if self.strikes(|r| r.lost_response) {
            return Err(unavailable(op, "chaos: response lost after the effect"));
        }
        Ok(())
    }

    /// The invocation stops here, when a crash strikes.
    async fn may_crash(&self) {
        if self.strikes(|r| r.crash) {
            crash().await;
        }
    }

    /// A conditional write, the faults around it. One that took effect (`applied` tells its
    /// answers that did) may be sent again by the SDK ([`Dice::retries_write`]), after its
    /// backoff: the caller hears the second answer (a conflict with the item its own first
    /// try wrote, or with what another writer wrote meanwhile).
    pub async fn write<R, F, W>(
        &self,
        op: &'static str,
        write: W,
        applied: impl Fn(&R) -> bool,
    ) -> Result<R, PortError>
    where
        W: Fn() -> F,
        F: Future<Output = Result<R, PortError>>,
    {
        let sent = async {
            let first = write().await?;
            if !applied(&first) || !self.retries_write() {
                return Ok(first);
            }
            self.backoff().await;
            write().await
        };
        self.around(op, sent).await
    }

    pub async fn around<R>(
        &self,
        op: &'static str,
        call: impl Future<Output = Result<R, PortError>>,
    ) -> Result<R, PortError> {
        self.before(op).await?;
        let out = call.await?;
        self.after(op).await?;
        Ok(out)
    }
}

fn unavailable(op: &'static str, message: &str) -> PortError {
    PortError::Unavailable {
        op,
        message: message.into(),
    }
}

tokio::task_local! {
    static INVOCATION: Arc<Notify>;
    /// [`super::Plant::StaleLastLook`]: the time the invocation's clock answers while a probe
    /// it won is on its way to the provider.
    static FROZEN: std::cell::Cell<Option<Timestamp>>;
}

/// The time this invocation's clock is stuck at, if a planted probe froze it.
pub fn frozen() -> Option<Timestamp> {
    FROZEN.try_with(std::cell::Cell::get).ok().flatten()
}

/// Stick (`Some`) or free (`None`) this invocation's clock.
pub fn freeze(at: Option<Timestamp>) {
    let _ = FROZEN.try_with(|f| f.set(at));
}

/// Stop the current invocation here (a Lambda killed mid-call): what it did so far stays done,
/// the rest never happens. Outside an invocation (an operator's command) nothing stops.
pub(super) async fn crash() {
    if INVOCATION.try_with(|kill| kill.notify_one()).is_ok() {
        std::future::pending::<()>().await;
    }
}

/// Run `work` as one invocation: `None` when a crash stopped it or it outlived `timeout`
/// (Lambda stops a function at its timeout, wherever it is).
pub async fn invoke<F: Future>(work: F, timeout: Duration) -> Option<F::Output> {
    let kill = Arc::new(Notify::new());
    let watch = kill.clone();
    let run = INVOCATION.scope(kill, async move {
        tokio::select! {
            biased;
            () = watch.notified() => None,
            () = tokio::time::sleep(timeout) => None,
            out = work => Some(out),
        }
    });
    FROZEN.scope(std::cell::Cell::new(None), run).await
}

/// An API call's invocation timeout.
pub(super) const API_TIMEOUT: Duration = Duration::from_secs(30);
