//! Expansion: a rule, a zone and a start to the instants of the series, one period at a time.

use std::collections::BTreeSet;

use jiff::civil::{Date, Time};
use jiff::tz::TimeZone;

use super::period::Plan;
use super::{Freq, Rule};
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
        if self.empty_run >= cycle(self.plan.freq()) || self.bound.is_some_and(|b| self.floor > b) {
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
