//! What a 429 means to the policy (the consumer's side is `consumer::steps::health`): the
//! provider's `Retry-After` (RFC 9110 §10.2.3: delta-seconds or an HTTP-date; anything else is
//! ignored, never a panic: a malformed header must not be able to crash a record), and the
//! delay — never earlier than the provider asked, spending the throttle budget, never the
//! attempt budget.

use std::time::{Duration, UNIX_EPOCH};

use rand::{Rng, RngExt};

use super::{full_jitter, Next, Outcome, RetryPolicy, Spent};
use crate::clock::Timestamp;
use crate::domain::DeadReason;

/// Longest wait representable here (~136 years): a header is honoured to the second, and any
/// real delivery is stale long before this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(u32::MAX as u64);

/// The earliest time the provider allows another call, or `None` when the header is absent,
/// malformed or negative. A date in the past means "now".
pub fn parse_retry_after(raw: &str, now: Timestamp) -> Option<Timestamp> {
    let value = raw.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // All digits: delta-seconds. Too many digits to fit is a very long wait, capped.
        let secs = value.parse::<u64>().unwrap_or(u64::MAX);
        let wait = Duration::from_secs(secs).min(MAX_RETRY_AFTER);
        return Some(now.plus(wait));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    let ms = match when.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).ok()?,
        Err(_) => return Some(now),
    };
    let at = Timestamp::from_millis(ms).max(now);
    Some(at.min(now.plus(MAX_RETRY_AFTER)))
}

/// A throttled outcome (a 429, or a delivery the gate held): `Err` with its death once the
/// throttle budget is spent, else the delay before the next try.
pub(super) fn delay(
    policy: &RetryPolicy,
    spent: Spent,
    outcome: &Outcome,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Result<Duration, Next> {
    let retry_after = outcome.retry_after();
    let throttles = spent.throttles.saturating_add(1);
    if throttles > policy.max_throttle_deferrals {
        return Err(Next::Dead(DeadReason::ThrottleExhausted));
    }
    Ok(throttle_delay(policy, throttles, retry_after, now, rng))
}

fn throttle_delay(
    policy: &RetryPolicy,
    throttles: u32,
    retry_after: Option<Timestamp>,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Duration {
    match retry_after {
        // Never earlier than the provider asked; a little jitter after it so a reopening is
        // not a stampede.
        Some(at) => {
            let wait = at.since(now);
            let spread = (wait.as_millis() as u64 / 10).min(5_000);
            wait + Duration::from_millis(rng.random_range(0..=spread))
        }
        None => full_jitter(
            policy.throttle_base_secs,
            policy.throttle_cap_secs,
            throttles,
            rng,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Sun, 06 Nov 1994 08:49:37 GMT (the RFC's example).
    const RFC_EXAMPLE_MS: i64 = 784_111_777_000;

    #[test]
    fn delta_seconds() {
        let now = Timestamp::from_millis(1_000);
        assert_eq!(
            parse_retry_after("120", now),
            Some(Timestamp::from_millis(121_000))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(now));
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(now.plus(MAX_RETRY_AFTER))
        );
    }

    #[test]
    fn http_dates_in_the_future_and_past() {
        let before = Timestamp::from_millis(RFC_EXAMPLE_MS - 30_000);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", before),
            Some(Timestamp::from_millis(RFC_EXAMPLE_MS))
        );
        let after = Timestamp::from_millis(RFC_EXAMPLE_MS + 30_000);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", after),
            Some(after),
            "a past date means now"
        );
    }

    #[test]
    fn malformed_or_negative_values_are_ignored() {
        let now = Timestamp::from_millis(1_000);
        for bad in [
            "",
            "-5",
            "1.5",
            "soon",
            "Sun, 99 Nov 1994 08:49:37 GMT",
            "12s",
            "\u{0}",
        ] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }
}
