//! Time: the [`Timestamp`] type (epoch milliseconds) and the [`Clock`] port.
//!
//! Library code never reads the system time or starts a tokio timer of its own: it asks a
//! `Clock`. On AWS that is [`SystemClock`]; the simulation and the tests drive a virtual clock
//! (the harness's `ManualClock`), whose `sleep` advances virtual time at once, so the same seed
//! gives the same run.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A point in time as epoch milliseconds (the unit of every time attribute but the TTL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_millis(ms: i64) -> Self {
        Self(ms)
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// Epoch seconds, rounded up: what DynamoDB's TTL attribute wants.
    pub fn as_epoch_seconds_ceil(self) -> i64 {
        self.0.div_euclid(1000) + i64::from(self.0.rem_euclid(1000) != 0)
    }

    pub fn plus(self, d: Duration) -> Self {
        Self(
            self.0
                .saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        )
    }

    pub fn minus(self, d: Duration) -> Self {
        Self(
            self.0
                .saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        )
    }

    /// `self - earlier`, or zero when `earlier` is not earlier.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

impl Timestamp {
    /// UTC as `2026-12-01T07:56:57.123Z` (RFC 3339), for people reading it.
    pub fn to_rfc3339(self) -> String {
        let ms = self.0.rem_euclid(1000);
        let secs = self.0.div_euclid(1000);
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = civil_from_days(days);
        let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{ms:03}Z")
    }

    /// An RFC 3339 time with its offset (`2026-12-24T17:00:00Z`, `…+01:00`), to the
    /// millisecond (finer digits are cut); `None` when it is not one.
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        let t: jiff::Timestamp = s.parse().ok()?;
        Some(Self(t.as_millisecond()))
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// Whole seconds, rounded up: SQS delays and visibility timeouts are whole seconds, and a
/// delay rounded down could land before a provider's Retry-After.
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// The time port (docs/design.md, "Ports" and "Local and embedded runs").
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
    /// Wait for `d`. The manual clock advances virtual time instead of waiting.
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send;
}

impl<C: Clock> Clock for Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
        (**self).sleep(d)
    }
}

/// Wall-clock time, for the Lambda functions.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Timestamp(ms)
    }
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_seconds_round_up() {
        assert_eq!(Timestamp::from_millis(1_000).as_epoch_seconds_ceil(), 1);
        assert_eq!(Timestamp::from_millis(1_001).as_epoch_seconds_ceil(), 2);
        assert_eq!(ceil_secs(Duration::from_millis(1_001)), 2);
        assert_eq!(ceil_secs(Duration::from_secs(3)), 3);
    }

    #[test]
    fn rfc3339_in_utc() {
        assert_eq!(
            Timestamp::from_millis(0).to_rfc3339(),
            "1970-01-01T00:00:00.000Z"
        );
        let t = Timestamp::from_millis(1_700_000_000_123);
        assert_eq!(t.to_rfc3339(), "2023-11-14T22:13:20.123Z");
        let leap = Timestamp::from_millis(951_782_400_000);
        assert_eq!(leap.to_rfc3339(), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            Timestamp::from_millis(-1).to_rfc3339(),
            "1969-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn rfc3339_parses_what_it_prints_and_offsets() {
        let t = Timestamp::from_millis(1_700_000_000_123);
        assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()), Some(t));
        assert_eq!(
            Timestamp::parse_rfc3339("2023-11-14T23:13:20.123+01:00"),
            Some(t)
        );
        assert_eq!(Timestamp::parse_rfc3339("2023-11-14 22:13"), None);
        assert_eq!(Timestamp::parse_rfc3339("tomorrow"), None);
    }
}
