//! Expansion: a rule, a zone and a start to the instants of the series, one period at a time.

use std::collections::BTreeSet;

use jiff::civil::{Date, DateTime, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::Span;

use super::{ByDay, Freq, Rule};
use crate::clock::Timestamp;

/// jiff's widest UTC offset (±25:59:59), rounded up: no wall time at or after a date's
/// midnight is an instant earlier than that midnight read as UTC, minus this.
const MAX_OFFSET_MS: i64 = 26 * 3_600_000;

/// Periods in a row with no candidate after which none will ever come. The Gregorian
/// calendar repeats every 400 years (146,097 days: exactly 20,871 weeks, 4,800 months), what a
/// period holds depends only on its place in that cycle, and every INTERVAL-th period comes
/// back to the same places within as many periods as the cycle has. A leap-day rule, with one
/// period in 4 (or 8) years, is far inside; FREQ=MONTHLY;BYDAY=5MO;BYMONTHDAY=1 ends after
/// 4,800 empty months, which takes milliseconds.
fn cycle(freq: Freq) -> u32 {
    match freq {
        Freq::Daily => 146_097,
        Freq::Weekly => 20_871,
        Freq::Monthly => 4_800,
        Freq::Yearly => 400,
    }
}

/// The instants of one series, ascending and each once ([`Rule::occurrences`]).
///
/// Memory is one period's candidates plus about two days of instants: they are held until
/// no later period can put an instant before them (a gap can push a wall time past the next
/// period's first one).
#[derive(Debug, Clone)]
pub struct Occurrences {
    plan: Plan,
    zone: TimeZone,
    /// The first day of the first period.
    anchor: Date,
    /// The first day of the period to generate next, `None` past jiff's range.
    next_first: Option<Date>,
    /// Periods generated so far.
    periods: i64,
    start: i64,
    /// The earlier of `end` and the rule's UNTIL.
    bound: Option<i64>,
    /// What COUNT still allows.
    remaining: Option<u32>,
    /// Instants generated but not yielded: at or after `start`, at or before `bound`.
    pending: BTreeSet<i64>,
    /// No period not generated yet has an instant before this.
    floor: i64,
    empty_run: u32,
    /// No more periods: the cycle ran empty, or `bound` or jiff's range was passed.
    exhausted: bool,
}

impl Occurrences {
    pub(super) fn new(
        rule: &Rule,
        zone: &TimeZone,
        start: Timestamp,
        end: Option<Timestamp>,
    ) -> Self {
        let bound = match (end, rule.until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let local =
            jiff::Timestamp::from_millisecond(start.as_millis()).map(|t| zone.to_datetime(t));
        let plan = Plan::new(rule, local.clone().unwrap_or_default());
        let anchor = local.ok().and_then(|l| plan.period_of(l.date()));
        Self {
            plan,
            zone: zone.clone(),
            anchor: anchor.unwrap_or_default(),
            next_first: anchor,
            periods: 0,
            start: start.as_millis(),
            bound: bound.map(Timestamp::as_millis),
            remaining: rule.count,
            pending: BTreeSet::new(),
            floor: i64::MIN,
            empty_run: 0,
            exhausted: anchor.is_none(),
        }
    }

    /// Generate the next period: its instants into `pending`, and the new floor.
    fn advance(&mut self) {
        let Some(first) = self.next_first else {
            self.exhausted = true;
            return;
        };
        self.periods += 1;
        self.next_first = self.plan.nth_period(self.anchor, self.periods);
        let walls = self.plan.candidates(first);
        self.empty_run = if walls.is_empty() {
            self.empty_run + 1
        } else {
            0
        };
        for wall in walls {
            match self.zone.to_ambiguous_timestamp(wall).compatible() {
                Ok(t) => {
                    let t = t.as_millisecond();
                    if t >= self.start && self.bound.is_none_or(|b| t <= b) {
                        self.pending.insert(t);
                    }
                }
                Err(_) => self.exhausted = true,
            }
        }
        let floor = self.next_first.and_then(|d| {
            TimeZone::UTC
                .to_timestamp(d.to_datetime(Time::midnight()))
                .ok()
        });
        match floor {
            Some(t) => self.floor = t.as_millisecond() - MAX_OFFSET_MS,
            None => self.exhausted = true,
        }
        if self.empty_run >= cycle(self.plan.freq) || self.bound.is_some_and(|b| self.floor > b) {
            self.exhausted = true;
        }
    }
}

impl Iterator for Occurrences {
    type Item = Timestamp;

    fn next(&mut self) -> Option<Timestamp> {
        loop {
            if self.remaining == Some(0) {
                return None;
            }
            match self.pending.first() {
                Some(&t) if self.exhausted || t < self.floor => {
                    self.pending.pop_first();
                    if let Some(r) = &mut self.remaining {
                        *r -= 1;
                    }
                    return Some(Timestamp::from_millis(t));
                }
                None if self.exhausted => return None,
                _ => self.advance(),
            }
        }
    }
}

/// The rule with what it leaves open taken from the start (RFC 5545's DTSTART defaults).
#[derive(Debug, Clone)]
struct Plan {
    freq: Freq,
    interval: i64,
    wkst: Weekday,
    /// Empty: every month.
    months: Vec<i8>,
    month_days: Vec<i8>,
    by_day: Vec<ByDay>,
    /// BYHOUR × BYMINUTE at the start's second, ascending.
    times: Vec<Time>,
    set_pos: Vec<i16>,
}

/// What a BYDAY ordinal counts within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Month,
    Year,
}

impl Plan {
    fn new(rule: &Rule, start: DateTime) -> Self {
        let mut months = rule.by_month.clone();
        let mut month_days = rule.by_month_day.clone();
        let mut by_day = rule.by_day.clone();
        let no_day = by_day.is_empty() && month_days.is_empty();
        match rule.freq {
            Freq::Daily => {}
            Freq::Weekly if by_day.is_empty() => by_day.push(ByDay {
                ordinal: None,
                weekday: start.weekday(),
            }),
            Freq::Weekly => {}
            Freq::Monthly if no_day => month_days.push(start.day()),
            Freq::Monthly => {}
            Freq::Yearly if no_day => {
                month_days.push(start.day());
                if months.is_empty() {
                    months.push(start.month());
                }
            }
            Freq::Yearly => {}
        }
        let or_start = |list: &[i8], own: i8| {
            if list.is_empty() {
                vec![own]
            } else {
                list.to_vec()
            }
        };
        let minutes = or_start(&rule.by_minute, start.minute());
        let times = or_start(&rule.by_hour, start.hour())
            .into_iter()
            .flat_map(|h| {
                minutes
                    .iter()
                    .filter_map(move |&m| Time::new(h, m, start.second(), 0).ok())
            })
            .collect();
        Self {
            freq: rule.freq,
            interval: i64::from(rule.interval),
            wkst: rule.wkst,
            months,
            month_days,
            by_day,
            times,
            set_pos: rule.by_set_pos.clone(),
        }
    }

    /// The first day of the period containing `date`.
    fn period_of(&self, date: Date) -> Option<Date> {
        match self.freq {
            Freq::Daily => Some(date),
            Freq::Weekly => {
                let back = self.wkst.until(date.weekday());
                date.checked_sub(Span::new().days(back)).ok()
            }
            Freq::Monthly => Some(date.first_of_month()),
            Freq::Yearly => Some(date.first_of_year()),
        }
    }

    /// The first day of period `n` (every INTERVAL-th from `anchor`'s).
    fn nth_period(&self, anchor: Date, n: i64) -> Option<Date> {
        let n = n.checked_mul(self.interval)?;
        let span = match self.freq {
            Freq::Daily => Span::new().try_days(n),
            Freq::Weekly => Span::new().try_weeks(n),
            Freq::Monthly => Span::new().try_months(n),
            Freq::Yearly => Span::new().try_years(n),
        };
        anchor.checked_add(span.ok()?).ok()
    }

    /// The period's wall times, ascending, after BYSETPOS.
    fn candidates(&self, first: Date) -> Vec<DateTime> {
        let walls: Vec<DateTime> = self
            .dates(first)
            .into_iter()
            .flat_map(|d| self.times.iter().map(move |&t| d.to_datetime(t)))
            .collect();
        if self.set_pos.is_empty() {
            return walls;
        }
        let len = walls.len() as i64;
        let mut at: Vec<usize> = self
            .set_pos
            .iter()
            .map(|&p| {
                if p > 0 {
                    i64::from(p) - 1
                } else {
                    len + i64::from(p)
                }
            })
            .filter(|i| (0..len).contains(i))
            .map(|i| i as usize)
            .collect();
        at.sort_unstable();
        at.dedup();
        at.into_iter().map(|i| walls[i]).collect()
    }

    /// The period's dates, ascending.
    fn dates(&self, first: Date) -> Vec<Date> {
        let mut dates: Vec<Date> = match self.freq {
            Freq::Daily => Vec::from_iter(self.day_matches(first).then_some(first)),
            Freq::Weekly => self
                .by_day
                .iter()
                .filter_map(|d| {
                    first
                        .checked_add(Span::new().days(self.wkst.until(d.weekday)))
                        .ok()
                })
                .filter(|d| self.month_ok(d.month()))
                .collect(),
            Freq::Monthly if self.month_ok(first.month()) => self.month_dates(first, Scope::Month),
            Freq::Monthly => Vec::new(),
            Freq::Yearly => self.year_dates(first),
        };
        dates.sort_unstable();
        dates.dedup();
        dates
    }

    fn month_ok(&self, month: i8) -> bool {
        self.months.is_empty() || self.months.contains(&month)
    }

    /// DAILY: each BYxxx part limits.
    fn day_matches(&self, d: Date) -> bool {
        let len = d.days_in_month();
        self.month_ok(d.month())
            && (self.month_days.is_empty()
                || self
                    .month_days
                    .iter()
                    .any(|&md| day_of(md, len) == Some(d.day())))
            && (self.by_day.is_empty() || self.by_day.iter().any(|b| b.weekday == d.weekday()))
    }

    fn year_dates(&self, jan1: Date) -> Vec<Date> {
        if self.months.is_empty() && self.month_days.is_empty() {
            return self
                .by_day
                .iter()
                .flat_map(|&b| by_day_dates(b, Scope::Year, jan1))
                .collect();
        }
        let (months, scope) = if self.months.is_empty() {
            ((1..=12).collect(), Scope::Year)
        } else {
            (self.months.clone(), Scope::Month)
        };
        months
            .into_iter()
            .filter_map(|m| Date::new(jan1.year(), m, 1).ok())
            .flat_map(|first| self.month_dates(first, scope))
            .collect()
    }

    /// The month's days by BYMONTHDAY (BYDAY limiting them, its ordinals counted in
    /// `scope`), or else by BYDAY.
    fn month_dates(&self, first: Date, scope: Scope) -> Vec<Date> {
        if self.month_days.is_empty() {
            return self
                .by_day
                .iter()
                .flat_map(|&b| by_day_dates(b, Scope::Month, first))
                .collect();
        }
        let len = first.days_in_month();
        self.month_days
            .iter()
            .filter_map(|&md| day_of(md, len))
            .filter_map(|day| Date::new(first.year(), first.month(), day).ok())
            .filter(|&d| {
                self.by_day.is_empty() || self.by_day.iter().any(|&b| by_day_has(b, scope, d))
            })
            .collect()
    }
}

/// Day `md` of a month of `len` days (negative counts from the end); `None` when the month
/// has no such day: RFC 5545 ignores invalid dates, never clamps them.
fn day_of(md: i8, len: i8) -> Option<i8> {
    let day = if md > 0 { md } else { len + 1 + md };
    (1..=len).contains(&day).then_some(day)
}

/// The days of the month or year containing `within` that BYDAY entry `b` names.
fn by_day_dates(b: ByDay, scope: Scope, within: Date) -> Vec<Date> {
    let (first, last) = match scope {
        Scope::Month => (within.first_of_month(), within.last_of_month()),
        Scope::Year => (within.first_of_year(), within.last_of_year()),
    };
    let Some(n) = b.ordinal else {
        let step = |d: Date, days: i8| d.checked_add(Span::new().days(days)).ok();
        let mut day = step(first, first.weekday().until(b.weekday));
        let mut out = Vec::new();
        while let Some(d) = day.filter(|&d| d <= last) {
            out.push(d);
            day = step(d, 7);
        }
        return out;
    };
    // `nth_weekday` counts from the day after (or before) the one it is called on.
    let nth = if n > 0 {
        first
            .yesterday()
            .and_then(|d| d.nth_weekday(n.into(), b.weekday))
    } else {
        last.tomorrow()
            .and_then(|d| d.nth_weekday(n.into(), b.weekday))
    };
    Vec::from_iter(nth.ok().filter(|&d| first <= d && d <= last))
}

fn by_day_has(b: ByDay, scope: Scope, d: Date) -> bool {
    d.weekday() == b.weekday && (b.ordinal.is_none() || by_day_dates(b, scope, d).contains(&d))
}
