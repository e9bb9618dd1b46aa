//! The readers of RRULE values (upper-cased already): numbers in a range, lists, weekdays,
//! BYDAY entries, UNTIL. Each error names its part and never echoes the value.

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;

use super::{ByDay, Freq, RuleError};
use crate::clock::Timestamp;

pub(super) fn freq(value: &str) -> Result<Freq, RuleError> {
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
pub(super) fn list<T: Ord>(
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

pub(super) fn ranged(part: &str, text: &str, lo: i32, hi: i32) -> Result<i32, RuleError> {
    let n = integer(part, text, false)?;
    if (lo..=hi).contains(&n) {
        Ok(n)
    } else {
        Err(RuleError::new(part, format!("must be {lo} to {hi}")))
    }
}

/// 1 to `max` or -`max` to -1 (counted from the end).
pub(super) fn signed_ranged(part: &str, text: &str, max: i32) -> Result<i32, RuleError> {
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

pub(super) fn weekday(code: &str) -> Option<Weekday> {
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
/// allows the ordinal is checked with the other parts.
pub(super) fn by_day(item: &str) -> Result<ByDay, RuleError> {
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
pub(super) fn until(value: &str) -> Result<Timestamp, RuleError> {
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
