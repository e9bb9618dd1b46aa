//! `policy::parse_retry_after` (RFC 9110 §10.2.3): never a panic, never a time before now
//! nor past the cap, and what a provider writes (delta-seconds or an HTTP-date) is read back.

use std::time::{Duration, UNIX_EPOCH};

use proptest::prelude::*;
use reminders::clock::Timestamp;
use reminders::policy::parse_retry_after;

/// The longest wait the parser honours.
const CAP: Duration = Duration::from_secs(u32::MAX as u64);
/// 9999-12-31T23:59:59Z, the last second an HTTP-date can name.
const LAST_HTTP_DATE_SECS: u64 = 253_402_300_799;

fn now() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        4 => (0i64..=4_102_444_800_000).prop_map(Timestamp::from_millis),
        1 => any::<i64>().prop_map(Timestamp::from_millis),
    ]
}

/// Header-shaped text: digits, signs, spaces, date words, and anything at all.
fn header() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ \t]{0,2}[-+]?[0-9]{0,25}(\\.[0-9]{0,3})?[ \t]{0,2}",
        "(Mon|Sun|Fri), [0-9]{1,3} (Jan|Feb|Nov|Foo) [0-9]{1,5} [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2} (GMT|UTC)?",
        "[A-Za-z]{0,9}(,)? ?[0-9]{0,2}-?[A-Za-z]{0,3}-?[0-9]{0,4} [0-9:]{0,8} ?[A-Z]{0,3}",
    ]
}

fn check_bounds(raw: &str, now: Timestamp) -> Result<(), TestCaseError> {
    if let Some(at) = parse_retry_after(raw, now) {
        prop_assert!(at >= now, "{:?} gave {} before now {}", raw, at, now);
        prop_assert!(at <= now.plus(CAP), "{:?} gave {} past the cap", raw, at);
        prop_assert!(!raw.trim().is_empty());
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::cheap())]

    /// Never a panic; a result is never before now nor past the cap.
    #[test]
    fn parses_any_text_within_bounds(raw in header(), now in now()) {
        check_bounds(&raw, now)?;
    }

    /// A signed, fractional or otherwise non-integer delta is ignored, not misread.
    #[test]
    fn signed_or_fractional_deltas_are_ignored(
        n in 0u64..1_000_000,
        shape in prop::sample::select(vec!["-{}", "+{}", "{}.5", "{}s", "0x{}", "{} 1"]),
        now in now(),
    ) {
        let raw = shape.replace("{}", &n.to_string());
        prop_assert_eq!(parse_retry_after(&raw, now), None, "{}", raw);
    }

    /// Delta-seconds as a provider writes them (any padding, any size): now plus that many
    /// seconds, capped.
    #[test]
    fn delta_seconds_round_trip(
        secs in prop_oneof![0u64..=100_000, any::<u64>()],
        zeros in 0usize..3,
        pad in "[ \t]{0,2}",
        now in now(),
    ) {
        let raw = format!("{pad}{}{secs}{pad}", "0".repeat(zeros));
        let expected = now.plus(Duration::from_secs(secs).min(CAP));
        prop_assert_eq!(parse_retry_after(&raw, now), Some(expected));
    }

    /// An HTTP-date as `httpdate` formats it reads back as that second, or as now when it is
    /// past, and capped when it is too far ahead.
    #[test]
    fn http_dates_round_trip(secs in 0u64..=LAST_HTTP_DATE_SECS, now in now()) {
        let when = UNIX_EPOCH + Duration::from_secs(secs);
        let raw = httpdate::fmt_http_date(when);
        let named = Timestamp::from_millis(secs as i64 * 1000);
        let expected = named.max(now).min(now.plus(CAP));
        prop_assert_eq!(parse_retry_after(&raw, now), Some(expected), "{}", raw);
    }
}
