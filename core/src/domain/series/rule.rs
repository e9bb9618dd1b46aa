//! Recurrence rules: the subset of RFC 5545 RRULE a reminder series repeats by, and the
//! instants a rule expands to in an IANA time zone.
//!
//! [`Rule::parse`] accepts FREQ (DAILY to YEARLY), INTERVAL, COUNT, UNTIL (UTC), BYMONTH,
//! BYMONTHDAY, BYDAY, BYHOUR, BYMINUTE, BYSETPOS and WKST, and refuses anything else with the
//! part at fault ([`RuleError::part`]); a bad value is described, never echoed.
//!
//! [`Rule::occurrences`] expands period by period as RFC 5545 §3.3.10 does: every INTERVAL-th
//! day, week (starting on WKST), month or year from the one containing the start, the
//! period's dates (the BYxxx parts, with the start's weekday, day or month where the rule
//! names none) times its hours and minutes, then BYSETPOS over that period's sorted wall
//! times. Each wall time becomes an instant by jiff's `compatible` rule: a time skipped by a
//! spring-forward gap is shifted forward by the gap's length (02:30 → 03:30), a time repeated
//! by a fall-back fold is its earlier instant. Two wall times that land on one instant yield
//! it once. (Quiet hours resolve a gap differently, to the gap's end: a window's edge is
//! not an appointment.)
//!
//! With no FREQ finer than DAILY and no BYSECOND, every occurrence falls on the start's
//! second of some minute, so occurrences are at least 60 s apart and at most 1,440 a day, for
//! any zone whose offsets are whole minutes (all of them since 1972).

mod expand;
mod parse;
mod period;
mod values;

use jiff::civil::Weekday;
use jiff::tz::TimeZone;

use crate::clock::Timestamp;

pub use expand::Occurrences;

/// How often a rule's periods come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Freq {
    Daily,
    Weekly,
    Monthly,
    Yearly,
}

impl Freq {
    fn name(self) -> &'static str {
        match self {
            Freq::Daily => "DAILY",
            Freq::Weekly => "WEEKLY",
            Freq::Monthly => "MONTHLY",
            Freq::Yearly => "YEARLY",
        }
    }
}

/// A rule that cannot be accepted: the RRULE part at fault (`FREQ`, `BYDAY`, …, or `rule` for
/// the text as a whole) and why, in one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rule part {part}: {message}")]
pub struct RuleError {
    pub part: String,
    pub message: String,
}

impl RuleError {
    fn new(part: &str, message: impl Into<String>) -> Self {
        Self {
            part: part.to_owned(),
            message: message.into(),
        }
    }
}

/// One BYDAY entry: a weekday, with an ordinal (`-1FR`, the last Friday) or without (`FR`,
/// every Friday).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ByDay {
    ordinal: Option<i8>,
    weekday: Weekday,
}

// Sorted by weekday from Monday, then ordinal: the canonical order of BYDAY.
impl Ord for ByDay {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let key = |d: &ByDay| (d.weekday.to_monday_zero_offset(), d.ordinal);
        key(self).cmp(&key(other))
    }
}

impl PartialOrd for ByDay {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A parsed rule. Lists are sorted and without repeats, so two texts that mean the same rule
/// give equal values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    freq: Freq,
    interval: u16,
    count: Option<u32>,
    until: Option<Timestamp>,
    by_month: Vec<i8>,
    by_month_day: Vec<i8>,
    by_day: Vec<ByDay>,
    by_hour: Vec<i8>,
    by_minute: Vec<i8>,
    by_set_pos: Vec<i16>,
    wkst: Weekday,
}

impl Rule {
    /// Parse `FREQ=WEEKLY;BYDAY=MO,TU;BYHOUR=9;BYMINUTE=15`: names and values in any case, an
    /// optional leading `RRULE:`, parts in any order, each at most once.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        parse::parse(text)
    }

    pub fn freq(&self) -> Freq {
        self.freq
    }

    pub fn count(&self) -> Option<u32> {
        self.count
    }

    /// The rule's own UNTIL (a date alone means 23:59:59 UTC that day).
    pub fn until(&self) -> Option<Timestamp> {
        self.until
    }

    /// The canonical text: parts in a fixed order, upper case, defaults (INTERVAL=1,
    /// WKST=MO) left out. `Rule::parse(&r.as_text()) == Ok(r)`.
    pub fn as_text(&self) -> String {
        fn list<T: ToString>(name: &str, values: &[T]) -> Option<String> {
            let items: Vec<String> = values.iter().map(T::to_string).collect();
            (!items.is_empty()).then(|| format!("{name}={}", items.join(",")))
        }
        let by_day: Vec<String> = self
            .by_day
            .iter()
            .map(|d| match d.ordinal {
                Some(n) => format!("{n}{}", weekday_code(d.weekday)),
                None => weekday_code(d.weekday).to_owned(),
            })
            .collect();
        let parts = [
            Some(format!("FREQ={}", self.freq.name())),
            (self.interval != 1).then(|| format!("INTERVAL={}", self.interval)),
            self.count.map(|c| format!("COUNT={c}")),
            self.until.map(|u| format!("UNTIL={}", until_text(u))),
            list("BYMONTH", &self.by_month),
            list("BYMONTHDAY", &self.by_month_day),
            list("BYDAY", &by_day),
            list("BYHOUR", &self.by_hour),
            list("BYMINUTE", &self.by_minute),
            list("BYSETPOS", &self.by_set_pos),
            (self.wkst != Weekday::Monday).then(|| format!("WKST={}", weekday_code(self.wkst))),
        ];
        parts.into_iter().flatten().collect::<Vec<_>>().join(";")
    }

    /// The occurrences, ascending and never the same instant twice, of a series whose first
    /// possible instant is `start`, expanded in `zone`, up to `end` inclusive (and the rule's
    /// UNTIL, whichever is earlier). COUNT counts from the first occurrence at or after
    /// `start`. Lazy: a rule without an end is an endless iterator; one that can never match
    /// again ends (see [`Occurrences`]).
    pub fn occurrences(
        &self,
        zone: &TimeZone,
        start: Timestamp,
        end: Option<Timestamp>,
    ) -> Occurrences {
        Occurrences::new(self, zone, start, end)
    }
}

fn weekday_code(day: Weekday) -> &'static str {
    match day {
        Weekday::Monday => "MO",
        Weekday::Tuesday => "TU",
        Weekday::Wednesday => "WE",
        Weekday::Thursday => "TH",
        Weekday::Friday => "FR",
        Weekday::Saturday => "SA",
        Weekday::Sunday => "SU",
    }
}

/// `YYYYMMDDTHHMMSSZ`; UNTIL is whole seconds, so nothing is lost.
fn until_text(until: Timestamp) -> String {
    jiff::Timestamp::from_millisecond(until.as_millis())
        .map(|t| t.strftime("%Y%m%dT%H%M%SZ").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "rule_tests.rs"]
mod tests;
#[cfg(test)]
#[path = "rule_zone_tests.rs"]
mod zone_tests;
