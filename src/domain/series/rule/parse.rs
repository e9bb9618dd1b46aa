//! RRULE text to [`Rule`]: a reader per part, then the checks that need several parts.

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;

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

fn freq(value: &str) -> Result<Freq, RuleError> {
    match value {
        "DAILY" => Ok(Freq::Daily),
        "WEEKLY" => Ok(Freq::Weekly),
        "MONTHLY" => Ok(Freq::Monthly),
        "YEARLY" => Ok(Freq::Yearly),
        "SECONDLY" | "MINUTELY" | "HOURLY" => Err(RuleError::new(
            "FREQ",
            "must be DAILY, WEEKLY, MONTHLY or YEARLY (finer ones are not supported)",
        )),
        _ => Err(RuleError::new(
            "FREQ",
            "must be DAILY, WEEKLY, MONTHLY or YEARLY",
        )),
    }
}

/// A comma-separated list, sorted and without repeats (so equal rules compare equal).
fn list<T: Ord>(
    part: &str,
    value: &str,
    item: impl Fn(&str) -> Result<T, RuleError>,
) -> Result<Vec<T>, RuleError> {
    let mut items = value
        .split(',')
        .map(|s| match s {
            "" => Err(RuleError::new(part, "has an empty item in its list")),
            s => item(s),
        })
        .collect::<Result<Vec<T>, _>>()?;
    items.sort();
    items.dedup();
    Ok(items)
}

/// A decimal whole number, with a sign only where `signed`. Nine digits at most are read; a
/// longer number saturates, to be refused by the caller's range.
fn integer(part: &str, text: &str, signed: bool) -> Result<i32, RuleError> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') if signed => (true, &text[1..]),
        Some(b'+') if signed => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RuleError::new(part, "must be whole numbers"));
    }
    let n = digits.parse::<i32>().unwrap_or(i32::MAX);
    Ok(if negative { -n } else { n })
}

fn ranged(part: &str, text: &str, lo: i32, hi: i32) -> Result<i32, RuleError> {
    let n = integer(part, text, false)?;
    if (lo..=hi).contains(&n) {
        Ok(n)
    } else {
        Err(RuleError::new(part, format!("must be {lo} to {hi}")))
    }
}

/// 1 to `max` or -`max` to -1 (counted from the end).
fn signed_ranged(part: &str, text: &str, max: i32) -> Result<i32, RuleError> {
    let n = integer(part, text, true)?;
    if n != 0 && n.unsigned_abs() <= max.unsigned_abs() {
        Ok(n)
    } else {
        Err(RuleError::new(
            part,
            format!("must be 1 to {max} or -{max} to -1"),
        ))
    }
}

fn weekday(code: &str) -> Option<Weekday> {
    Some(match code {
        "MO" => Weekday::Monday,
        "TU" => Weekday::Tuesday,
        "WE" => Weekday::Wednesday,
        "TH" => Weekday::Thursday,
        "FR" => Weekday::Friday,
        "SA" => Weekday::Saturday,
        "SU" => Weekday::Sunday,
        _ => return None,
    })
}

/// `MO`, or a signed ordinal and a weekday: `1MO`, `-1FR`, `+2TU`. Whether the rule's FREQ
/// allows the ordinal is for [`check`].
fn by_day(item: &str) -> Result<ByDay, RuleError> {
    let bad = || {
        RuleError::new(
            "BYDAY",
            "must be weekdays MO to SU, each maybe after an ordinal such as 1 or -1",
        )
    };
    let split = item
        .len()
        .checked_sub(2)
        .filter(|&at| item.is_char_boundary(at))
        .ok_or_else(bad)?;
    let (ordinal, code) = item.split_at(split);
    let weekday = weekday(code).ok_or_else(bad)?;
    if ordinal.is_empty() {
        return Ok(ByDay {
            ordinal: None,
            weekday,
        });
    }
    let n = signed_ranged("BYDAY", ordinal, 53)?;
    Ok(ByDay {
        ordinal: Some(n as i8),
        weekday,
    })
}

/// `YYYYMMDDTHHMMSSZ`, or `YYYYMMDD` for 23:59:59 UTC that day.
fn until(value: &str) -> Result<Timestamp, RuleError> {
    let bad = || {
        RuleError::new(
            "UNTIL",
            "must be a UTC time YYYYMMDDTHHMMSSZ or a date YYYYMMDD",
        )
    };
    if !value.is_ascii() {
        return Err(bad());
    }
    let b = value.as_bytes();
    let (date, time) = match b.len() {
        8 => (value, None),
        16 if b[8] == b'T' && b[15] == b'Z' => (&value[..8], Some(&value[9..15])),
        15 if b[8] == b'T' => return Err(RuleError::new("UNTIL", "must be in UTC (end in Z)")),
        _ => return Err(bad()),
    };
    let digits = |s: &str| {
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse::<i16>().ok())
            .flatten()
            .ok_or_else(bad)
    };
    let date = Date::new(
        digits(&date[..4])?,
        digits(&date[4..6])? as i8,
        digits(&date[6..])? as i8,
    )
    .map_err(|_| RuleError::new("UNTIL", "is not a calendar date"))?;
    let time = match time {
        None => Time::constant(23, 59, 59, 0),
        Some(t) => Time::new(
            digits(&t[..2])? as i8,
            digits(&t[2..4])? as i8,
            digits(&t[4..])? as i8,
            0,
        )
        .map_err(|_| RuleError::new("UNTIL", "is not a time of day"))?,
    };
    let at = TimeZone::UTC
        .to_timestamp(date.to_datetime(time))
        .map_err(|_| RuleError::new("UNTIL", "is out of range"))?;
    Ok(Timestamp::from_millis(at.as_millisecond()))
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
