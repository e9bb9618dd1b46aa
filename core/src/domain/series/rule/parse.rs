//! RRULE text to [`Rule`]: each part read once by its value reader, then the checks that
//! need several parts.

use jiff::civil::Weekday;

use super::values::{by_day, freq, list, ranged, signed_ranged, until, weekday};
use super::{ByDay, Freq, Rule, RuleError};
use crate::clock::Timestamp;

/// Longer than any sensible rule (every BYSETPOS value fits in 3.5 KB): a bound on the work
/// one untrusted text can ask for.
const MAX_TEXT: usize = 4096;

/// The parts as read, before the checks across parts.
#[derive(Default)]
struct Parts {
    freq: Option<Freq>,
    interval: Option<u16>,
    count: Option<u32>,
    until: Option<Timestamp>,
    by_month: Option<Vec<i8>>,
    by_month_day: Option<Vec<i8>>,
    by_day: Option<Vec<ByDay>>,
    by_hour: Option<Vec<i8>>,
    by_minute: Option<Vec<i8>>,
    by_set_pos: Option<Vec<i16>>,
    wkst: Option<Weekday>,
}

pub(super) fn parse(text: &str) -> Result<Rule, RuleError> {
    if text.len() > MAX_TEXT {
        return Err(RuleError::new(
            "rule",
            format!("is longer than {MAX_TEXT} bytes"),
        ));
    }
    let body = match text.get(..6) {
        Some(prefix) if prefix.eq_ignore_ascii_case("RRULE:") => &text[6..],
        _ => text,
    };
    if body.is_empty() {
        return Err(RuleError::new("rule", "is empty"));
    }
    let mut parts = Parts::default();
    for item in body.split(';') {
        read_part(&mut parts, item)?;
    }
    check(parts)
}

fn read_part(parts: &mut Parts, item: &str) -> Result<(), RuleError> {
    if item.is_empty() {
        return Err(RuleError::new(
            "rule",
            "has an empty part (`;` with nothing after it)",
        ));
    }
    let (name, value) = item.split_once('=').unwrap_or((item, ""));
    let name = name.to_ascii_uppercase();
    if !is_part_name(&name) {
        return Err(RuleError::new(
            "rule",
            "has a part whose name is not a part name",
        ));
    }
    let value = value.to_ascii_uppercase();
    if value.is_empty() {
        return Err(RuleError::new(&name, "has no value"));
    }
    let (n, v) = (name.as_str(), value.as_str());
    match n {
        "FREQ" => set(&mut parts.freq, n, || freq(v)),
        "INTERVAL" => set(&mut parts.interval, n, || Ok(ranged(n, v, 1, 1000)? as u16)),
        "COUNT" => set(&mut parts.count, n, || Ok(ranged(n, v, 1, 10_000)? as u32)),
        "UNTIL" => set(&mut parts.until, n, || until(v)),
        "BYMONTH" => set(&mut parts.by_month, n, || {
            list(n, v, |s| Ok(ranged(n, s, 1, 12)? as i8))
        }),
        "BYMONTHDAY" => set(&mut parts.by_month_day, n, || {
            list(n, v, |s| Ok(signed_ranged(n, s, 31)? as i8))
        }),
        "BYDAY" => set(&mut parts.by_day, n, || list(n, v, by_day)),
        "BYHOUR" => set(&mut parts.by_hour, n, || {
            list(n, v, |s| Ok(ranged(n, s, 0, 23)? as i8))
        }),
        "BYMINUTE" => set(&mut parts.by_minute, n, || {
            list(n, v, |s| Ok(ranged(n, s, 0, 59)? as i8))
        }),
        "BYSETPOS" => set(&mut parts.by_set_pos, n, || {
            list(n, v, |s| Ok(signed_ranged(n, s, 366)? as i16))
        }),
        "WKST" => set(&mut parts.wkst, n, || {
            weekday(v).ok_or_else(|| RuleError::new(n, "must be a weekday, MO to SU"))
        }),
        "BYSECOND" | "BYWEEKNO" | "BYYEARDAY" => Err(RuleError::new(n, "is not supported")),
        _ => Err(RuleError::new(n, "is not an RRULE part")),
    }
}

/// Letters, digits and `-` (`X-FOO`), short: a name worth naming in an error.
fn is_part_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Each part at most once.
fn set<T>(
    slot: &mut Option<T>,
    name: &str,
    read: impl FnOnce() -> Result<T, RuleError>,
) -> Result<(), RuleError> {
    if slot.is_some() {
        return Err(RuleError::new(name, "appears more than once"));
    }
    *slot = Some(read()?);
    Ok(())
}

/// The checks across parts, then the rule.
fn check(parts: Parts) -> Result<Rule, RuleError> {
    let freq = parts
        .freq
        .ok_or_else(|| RuleError::new("FREQ", "is required"))?;
    if parts.count.is_some() && parts.until.is_some() {
        return Err(RuleError::new("UNTIL", "cannot be given with COUNT"));
    }
    let by_month = parts.by_month.unwrap_or_default();
    let by_month_day = parts.by_month_day.unwrap_or_default();
    let by_day = parts.by_day.unwrap_or_default();
    let by_hour = parts.by_hour.unwrap_or_default();
    let by_minute = parts.by_minute.unwrap_or_default();
    let by_set_pos = parts.by_set_pos.unwrap_or_default();
    check_ordinals(freq, &by_day, !by_month.is_empty())?;
    if freq == Freq::Weekly && !by_month_day.is_empty() {
        return Err(RuleError::new(
            "BYMONTHDAY",
            "cannot be used with FREQ=WEEKLY",
        ));
    }
    let months: Vec<i8> = if by_month.is_empty() {
        (1..=12).collect()
    } else {
        by_month.clone()
    };
    let possible = |day: &i8| {
        months
            .iter()
            .any(|&m| day.unsigned_abs() <= longest_month(m))
    };
    if !by_month_day.is_empty() && !by_month_day.iter().any(possible) {
        return Err(RuleError::new(
            "BYMONTHDAY",
            "names no day that a month in BYMONTH has",
        ));
    }
    let selects = [
        by_month.len(),
        by_month_day.len(),
        by_day.len(),
        by_hour.len(),
        by_minute.len(),
    ];
    if !by_set_pos.is_empty() && selects.iter().all(|&n| n == 0) {
        return Err(RuleError::new(
            "BYSETPOS",
            "needs another BYxxx part to select from",
        ));
    }
    Ok(Rule {
        freq,
        interval: parts.interval.unwrap_or(1),
        count: parts.count,
        until: parts.until,
        by_month,
        by_month_day,
        by_day,
        by_hour,
        by_minute,
        by_set_pos,
        wkst: parts.wkst.unwrap_or(Weekday::Monday),
    })
}

/// An ordinal counts within the month (MONTHLY, or YEARLY with BYMONTH) or the year.
fn check_ordinals(freq: Freq, by_day: &[ByDay], by_month: bool) -> Result<(), RuleError> {
    let (limit, scope) = match freq {
        Freq::Daily | Freq::Weekly => (0, ""),
        Freq::Monthly => (5, "FREQ=MONTHLY"),
        Freq::Yearly if by_month => (5, "FREQ=YEARLY with BYMONTH"),
        Freq::Yearly => (53, "FREQ=YEARLY"),
    };
    for ordinal in by_day.iter().filter_map(|d| d.ordinal) {
        if limit == 0 {
            return Err(RuleError::new(
                "BYDAY",
                "takes an ordinal (such as 1MO) only with FREQ=MONTHLY or FREQ=YEARLY",
            ));
        }
        if ordinal.unsigned_abs() > limit {
            return Err(RuleError::new(
                "BYDAY",
                format!("ordinals must be 1 to {limit} or -{limit} to -1 with {scope}"),
            ));
        }
    }
    Ok(())
}

/// The most days month `m` has in any year.
fn longest_month(m: i8) -> u8 {
    match m {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}
