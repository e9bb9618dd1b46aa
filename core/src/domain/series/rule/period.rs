//! What one period of a rule holds: its dates, by the BYxxx parts and the start's defaults,
//! and its wall times after BYSETPOS. Calendar arithmetic only; no zone.

use jiff::civil::{Date, DateTime, Time, Weekday};
use jiff::Span;

use super::{ByDay, Freq, Rule};

/// The rule with what it leaves open taken from the start (RFC 5545's DTSTART defaults).
#[derive(Debug, Clone)]
pub(super) struct Plan {
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
    pub(super) fn freq(&self) -> Freq {
        self.freq
    }

    pub(super) fn new(rule: &Rule, start: DateTime) -> Self {
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
    pub(super) fn period_of(&self, date: Date) -> Option<Date> {
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
    pub(super) fn nth_period(&self, anchor: Date, n: i64) -> Option<Date> {
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
    pub(super) fn candidates(&self, first: Date) -> Vec<DateTime> {
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
