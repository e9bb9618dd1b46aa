//! `Rule::occurrences` against a brute-force oracle written here from RFC 5545, not from the
//! engine: walk every local day from the start's period, keep the days every predicate of the
//! rule accepts, make their wall times, resolve each by the DST rule (a time in a gap shifted
//! forward by the gap, a repeated one at its earlier instant), BYSETPOS per period, then the
//! start, the end and COUNT. Also: occurrences at least a minute apart and at most 1,440 a
//! day, and the canonical text parsing back to the same rule.

use std::collections::BTreeMap;

use jiff::civil::{Date, DateTime, Time, Weekday};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::SignedDuration;
use proptest::prelude::*;
use proptest::test_runner::Config;
use reminders::clock::Timestamp;
use reminders::domain::series::{Freq, Rule};

const ZONES: [&str; 8] = [
    "America/New_York",
    "Europe/Paris",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Asia/Kolkata",
    "UTC",
    "America/Sao_Paulo",
    "Europe/London",
];
/// 2025-01-01T00:00:00Z and 2031-01-01T00:00:00Z.
const FROM_MS: i64 = 1_735_689_600_000;
const TO_MS: i64 = 1_924_992_000_000;
const DAY_MS: i64 = 86_400_000;
/// Occurrences compared per case.
const N: usize = 200;

/// A generated rule, as data the oracle reads; its text is what the engine parses.
#[derive(Debug, Clone)]
struct Spec {
    freq: Freq,
    interval: u16,
    by_month: Vec<i8>,
    by_month_day: Vec<i8>,
    by_day: Vec<(Option<i8>, Weekday)>,
    by_hour: Vec<i8>,
    by_minute: Vec<i8>,
    by_set_pos: Vec<i16>,
    count: Option<u32>,
    wkst: Weekday,
}

const CODES: [(&str, Weekday); 7] = [
    ("MO", Weekday::Monday),
    ("TU", Weekday::Tuesday),
    ("WE", Weekday::Wednesday),
    ("TH", Weekday::Thursday),
    ("FR", Weekday::Friday),
    ("SA", Weekday::Saturday),
    ("SU", Weekday::Sunday),
];

fn code(day: Weekday) -> &'static str {
    CODES.iter().find(|(_, d)| *d == day).expect("a weekday").0
}

impl Spec {
    /// The rule's parts, in no particular case or order beyond what `upper` and the caller
    /// choose.
    fn parts(&self) -> Vec<String> {
        fn join<T: ToString>(v: &[T]) -> String {
            v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
        }
        let freq = match self.freq {
            Freq::Daily => "DAILY",
            Freq::Weekly => "WEEKLY",
            Freq::Monthly => "MONTHLY",
            Freq::Yearly => "YEARLY",
        };
        let mut parts = vec![
            format!("FREQ={freq}"),
            format!("INTERVAL={}", self.interval),
            format!("WKST={}", code(self.wkst)),
        ];
        let days: Vec<String> = self
            .by_day
            .iter()
            .map(|(n, d)| format!("{}{}", n.map_or(String::new(), |n| n.to_string()), code(*d)))
            .collect();
        let lists = [
            ("BYMONTH", join(&self.by_month)),
            ("BYMONTHDAY", join(&self.by_month_day)),
            ("BYDAY", days.join(",")),
            ("BYHOUR", join(&self.by_hour)),
            ("BYMINUTE", join(&self.by_minute)),
            ("BYSETPOS", join(&self.by_set_pos)),
        ];
        for (name, list) in lists {
            if !list.is_empty() {
                parts.push(format!("{name}={list}"));
            }
        }
        if let Some(c) = self.count {
            parts.push(format!("COUNT={c}"));
        }
        parts
    }

    fn text(&self) -> String {
        self.parts().join(";")
    }

    /// Whether some month BYMONTH allows has some day BYMONTHDAY names, in some year.
    fn month_days_possible(&self) -> bool {
        let longest = |m: i8| match m {
            2 => 29,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        let months: Vec<i8> = if self.by_month.is_empty() {
            (1..=12).collect()
        } else {
            self.by_month.clone()
        };
        self.by_month_day.is_empty()
            || months.iter().any(|&m| {
                self.by_month_day
                    .iter()
                    .any(|d| d.unsigned_abs() <= longest(m))
            })
    }
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v.dedup();
    v
}

fn weekday() -> impl Strategy<Value = Weekday> {
    prop::sample::select(CODES.iter().map(|(_, d)| *d).collect::<Vec<_>>())
}

fn freq() -> impl Strategy<Value = Freq> {
    prop::sample::select(vec![Freq::Daily, Freq::Weekly, Freq::Monthly, Freq::Yearly])
}

/// Some of the time a few values from `values`, else none.
fn some_of<T: Clone + std::fmt::Debug + 'static>(
    weight_none: u32,
    values: impl Strategy<Value = T> + 'static,
    max: usize,
) -> BoxedStrategy<Vec<T>> {
    prop_oneof![
        weight_none => Just(Vec::new()),
        1 => prop::collection::vec(values, 1..=max),
    ]
    .boxed()
}

fn ordinal(limit: i8) -> BoxedStrategy<i8> {
    let small = prop_oneof![1i8..=limit.min(5), -limit.min(5)..=-1i8];
    if limit <= 5 {
        small.boxed()
    } else {
        prop_oneof![2 => small, 1 => 1i8..=limit, 1 => -limit..=-1i8, 1 => 50i8..=53].boxed()
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    (freq(), some_of(2, 1i8..=12, 3).prop_map(sorted))
        .prop_flat_map(|(freq, by_month)| {
            let limit = match freq {
                Freq::Daily | Freq::Weekly => 0,
                Freq::Monthly => 5,
                Freq::Yearly if !by_month.is_empty() => 5,
                Freq::Yearly => 53,
            };
            let day = if limit == 0 {
                weekday().prop_map(|d| (None, d)).boxed()
            } else {
                (prop::option::weighted(0.5, ordinal(limit)), weekday()).boxed()
            };
            let month_day = prop_oneof![
                prop::sample::select(vec![1i8, 2, 13, 15, 28, 29, 30, 31, -1, -2, -7, -29, -31]),
                (1i8..=31),
                (-31i8..=-1),
            ];
            let month_days = if freq == Freq::Weekly {
                Just(Vec::new()).boxed()
            } else {
                some_of(2, month_day, 3).prop_map(sorted).boxed()
            };
            let set_pos =
                prop_oneof![3 => 1i16..=3, 3 => -3i16..=-1, 1 => 1i16..=366, 1 => -366i16..=-1];
            (
                Just((freq, by_month)),
                1u16..=4,
                month_days,
                some_of(1, day, 3).prop_map(|mut v| {
                    v.sort_by_key(|(n, d)| (d.to_monday_zero_offset(), *n));
                    v.dedup();
                    v
                }),
                some_of(1, 0i8..=23, 3).prop_map(sorted),
                some_of(1, 0i8..=59, 3).prop_map(sorted),
                some_of(3, set_pos, 2).prop_map(sorted),
                prop::option::weighted(0.25, 1u32..=50),
                weekday(),
            )
        })
        .prop_map(
            |(
                (freq, by_month),
                interval,
                by_month_day,
                by_day,
                by_hour,
                by_minute,
                set_pos,
                count,
                wkst,
            )| {
                let selects = !(by_month.is_empty()
                    && by_month_day.is_empty()
                    && by_day.is_empty()
                    && by_hour.is_empty()
                    && by_minute.is_empty());
                Spec {
                    freq,
                    interval,
                    by_month,
                    by_month_day,
                    by_day,
                    by_hour,
                    by_minute,
                    by_set_pos: if selects { set_pos } else { Vec::new() },
                    count,
                    wkst,
                }
            },
        )
}

/// A start in 2025-2030 at any millisecond, or (`near`) `back` before the zone's next
/// transition; with the latter, the two local hours either side of the transition, where a
/// wall time may be skipped or repeated.
fn start_in(tz: &TimeZone, base: i64, near: bool, back: i64) -> (Timestamp, Vec<i8>) {
    let base_ts = jiff::Timestamp::from_millisecond(base).expect("in range");
    let transition = tz
        .following(base_ts)
        .next()
        .map(|t| t.timestamp().as_millisecond())
        .filter(|&t| near && t < TO_MS);
    let Some(t) = transition else {
        return (Timestamp::from_millis(base), Vec::new());
    };
    let just_before = local(tz, Timestamp::from_millis(t - 1));
    let at = just_before
        .checked_add(SignedDuration::from_millis(1))
        .expect("in range");
    let hours = sorted(vec![just_before.hour(), at.hour()]);
    (Timestamp::from_millis(t - back), hours)
}

fn zone(name: &str) -> TimeZone {
    jiff::tz::db().get(name).expect("a bundled zone")
}

fn local(tz: &TimeZone, at: Timestamp) -> DateTime {
    tz.to_datetime(jiff::Timestamp::from_millisecond(at.as_millis()).expect("in range"))
}

/// The DST rule as the brief states it: a wall time in a gap happens at the same wall time
/// moved forward by the gap's length (read with the offset after it); a repeated wall time
/// at its earlier instant, the one read with the offset in force before the fold.
fn resolve(tz: &TimeZone, dt: DateTime) -> i64 {
    let at = match tz.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(dt),
        AmbiguousOffset::Fold { before, .. } => before.to_timestamp(dt),
        AmbiguousOffset::Gap { before, after } => {
            let gap = SignedDuration::from_secs(i64::from(after.seconds() - before.seconds()));
            after.to_timestamp(dt.checked_add(gap).expect("in range"))
        }
    };
    at.expect("in range").as_millisecond()
}

/// `d`'s place among the same weekdays of its month or year: (from the start, from the end),
/// as BYDAY ordinals count (1 and -1 for the first and the last).
fn ordinals(d: Date, in_year: bool) -> (i8, i8) {
    let (pos, len) = if in_year {
        (d.day_of_year(), d.last_of_year().day_of_year())
    } else {
        (i16::from(d.day()), i16::from(d.days_in_month()))
    };
    (((pos - 1) / 7 + 1) as i8, -(((len - pos) / 7 + 1) as i8))
}

/// Whether day `d` is one of the rule's, before INTERVAL and BYSETPOS.
fn day_matches(spec: &Spec, start: DateTime, d: Date) -> bool {
    let open = spec.by_day.is_empty() && spec.by_month_day.is_empty();
    let months = match spec.freq {
        Freq::Yearly if open && spec.by_month.is_empty() => vec![start.month()],
        _ => spec.by_month.clone(),
    };
    let month_days = match spec.freq {
        Freq::Monthly | Freq::Yearly if open => vec![start.day()],
        _ => spec.by_month_day.clone(),
    };
    let by_day = match spec.freq {
        Freq::Weekly if spec.by_day.is_empty() => vec![(None, start.weekday())],
        _ => spec.by_day.clone(),
    };
    let in_year = spec.freq == Freq::Yearly && spec.by_month.is_empty();
    let (from_start, from_end) = ordinals(d, in_year);
    let len = d.days_in_month();
    (months.is_empty() || months.contains(&d.month()))
        && (month_days.is_empty()
            || month_days
                .iter()
                .any(|&md| md == d.day() || (md < 0 && len + 1 + md == d.day())))
        && (by_day.is_empty()
            || by_day.iter().any(|&(n, wd)| {
                wd == d.weekday() && n.is_none_or(|n| n == from_start || n == from_end)
            }))
}

/// The oracle's occurrences from the days of every period that starts on or before
/// `last_day`, and the latest instant up to which that is the whole series.
fn oracle(
    spec: &Spec,
    tz: &TimeZone,
    start: Timestamp,
    end: Option<Timestamp>,
    horizon_days: i64,
) -> (Vec<i64>, i64) {
    let s = local(tz, start);
    let d0 = s.date();
    let week0 = (0..7)
        .map(|back| {
            d0.checked_sub(SignedDuration::from_hours(24 * back))
                .unwrap()
        })
        .find(|d| d.weekday() == spec.wkst)
        .unwrap();
    let walk_from = match spec.freq {
        Freq::Daily => d0,
        Freq::Weekly => week0,
        Freq::Monthly => d0.first_of_month(),
        Freq::Yearly => d0.first_of_year(),
    };
    // Days since the walk began for DAILY (which begins at the start's date) and WEEKLY (at
    // its week's WKST); calendar months or years since the start's for the others.
    let index_of = |i: i64, d: Date| match spec.freq {
        Freq::Daily => i,
        Freq::Weekly => i.div_euclid(7),
        Freq::Monthly => i64::from(d.year() - d0.year()) * 12 + i64::from(d.month() - d0.month()),
        Freq::Yearly => i64::from(d.year() - d0.year()),
    };
    let hours = if spec.by_hour.is_empty() {
        vec![s.hour()]
    } else {
        spec.by_hour.clone()
    };
    let minutes = if spec.by_minute.is_empty() {
        vec![s.minute()]
    } else {
        spec.by_minute.clone()
    };
    let horizon_end = d0
        .checked_add(SignedDuration::from_hours(24 * horizon_days))
        .unwrap();
    let mut groups: BTreeMap<i64, Vec<DateTime>> = BTreeMap::new();
    let (mut d, mut i, mut previous) = (walk_from, 0i64, None);
    loop {
        let index = index_of(i, d);
        // Past the horizon, finish the period under way: BYSETPOS needs all of it.
        if d > horizon_end && previous != Some(index) {
            break;
        }
        previous = Some(index);
        if index % i64::from(spec.interval) == 0 && day_matches(spec, s, d) {
            for &h in &hours {
                for &m in &minutes {
                    let time = Time::new(h, m, s.second(), 0).unwrap();
                    groups.entry(index).or_default().push(d.to_datetime(time));
                }
            }
        }
        d = d.tomorrow().unwrap();
        i += 1;
    }
    let last_day = d.yesterday().unwrap();
    let mut out: Vec<i64> = Vec::new();
    for walls in groups.values() {
        let len = walls.len() as i64;
        let chosen: Vec<&DateTime> = if spec.by_set_pos.is_empty() {
            walls.iter().collect()
        } else {
            (0..len)
                .filter(|&k| {
                    spec.by_set_pos.iter().any(|&p| {
                        let p = i64::from(p);
                        (p > 0 && k == p - 1) || (p < 0 && k == len + p)
                    })
                })
                .map(|k| &walls[k as usize])
                .collect()
        };
        out.extend(chosen.into_iter().map(|&dt| resolve(tz, dt)));
    }
    out.retain(|&t| t >= start.as_millis() && end.is_none_or(|e| t <= e.as_millis()));
    out.sort_unstable();
    out.dedup();
    if let Some(c) = spec.count {
        out.truncate(c as usize);
    }
    // A wall time on a later day is an instant after that day's midnight read as UTC, minus
    // at most a day and two hours of offset.
    let next_midnight = TimeZone::UTC
        .to_timestamp(last_day.tomorrow().unwrap().to_datetime(Time::midnight()))
        .unwrap()
        .as_millisecond();
    (out, next_midnight - 27 * 3_600_000)
}

fn check_spacing(all: &[Timestamp]) -> Result<(), TestCaseError> {
    for w in all.windows(2) {
        let gap = w[1].as_millis() - w[0].as_millis();
        prop_assert!(
            gap >= 60_000,
            "{} then {}",
            w[0].to_rfc3339(),
            w[1].to_rfc3339()
        );
    }
    for w in all.windows(1441) {
        prop_assert!(
            w[1440].as_millis() - w[0].as_millis() >= DAY_MS,
            "more than 1,440 in a day"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::config())]

    /// The engine's first occurrences are the oracle's, a minute apart or more.
    #[test]
    fn occurrences_match_the_oracle(
        mut spec in spec(),
        zone_name in prop::sample::select(ZONES.to_vec()),
        base in FROM_MS..TO_MS,
        near in any::<bool>(),
        back in 0..3 * DAY_MS,
        transition_hours in any::<bool>(),
        end_after in prop::option::weighted(0.3, 0..800 * DAY_MS),
    ) {
        let tz = zone(zone_name);
        let (start, hours) = start_in(&tz, base, near, back);
        if transition_hours && !hours.is_empty() {
            spec.by_hour = sorted([spec.by_hour, hours].concat());
        }
        let end = end_after.map(|ms| Timestamp::from_millis(start.as_millis() + ms));
        let rule = match Rule::parse(&spec.text()) {
            Ok(rule) => rule,
            Err(e) => {
                // The one refusal a generated rule can meet: a BYMONTHDAY no month has.
                prop_assert!(!spec.month_days_possible(), "{}: {}", spec.text(), e);
                prop_assert_eq!(e.part, "BYMONTHDAY");
                return Ok(());
            }
        };
        let horizon_days = if spec.freq == Freq::Yearly { 12 * 366 } else { 3 * 366 };
        let (want, complete_to) = oracle(&spec, &tz, start, end, horizon_days);
        let want: Vec<i64> = want.into_iter().filter(|&t| t <= complete_to).take(N).collect();
        let got: Vec<Timestamp> = rule
            .occurrences(&tz, start, end)
            .take_while(|t| t.as_millis() <= complete_to)
            .take(N)
            .collect();
        let got_ms: Vec<i64> = got.iter().map(|t| t.as_millis()).collect();
        prop_assert_eq!(
            &got_ms, &want,
            "{} in {} from {}", spec.text(), zone_name, start.to_rfc3339()
        );
        check_spacing(&got)?;
    }

    /// The canonical text parses back to the same rule, and so does the rule written in
    /// lower case, parts shuffled, with an `RRULE:` prefix.
    #[test]
    fn text_round_trips(
        (spec, order) in spec().prop_flat_map(|s| {
            let n = s.parts().len();
            (Just(s), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
        }),
        lower in any::<bool>(),
    ) {
        let Ok(rule) = Rule::parse(&spec.text()) else { return Ok(()) };
        prop_assert_eq!(Rule::parse(&rule.as_text()), Ok(rule.clone()));
        let parts = spec.parts();
        let shuffled: Vec<&str> = order.iter().map(|&i| parts[i].as_str()).collect();
        let mut text = format!("RRULE:{}", shuffled.join(";"));
        if lower {
            text = text.to_lowercase();
        }
        prop_assert_eq!(Rule::parse(&text), Ok(rule));
    }
}

proptest! {
    // Four days of every minute is 5,760 occurrences a case.
    #![proptest_config(Config { cases: 32, ..crate::config() })]

    /// Every minute of every day: a minute apart, never more than 1,440 a day, and a local
    /// day has 1,440 of them less the minutes a gap skips.
    #[test]
    fn every_minute_stays_a_minute_apart(
        zone_name in prop::sample::select(ZONES.to_vec()),
        base in FROM_MS..TO_MS,
        back in 0..2 * DAY_MS,
    ) {
        let tz = zone(zone_name);
        let (start, _) = start_in(&tz, base, true, back);
        let hours: Vec<String> = (0..24).map(|h: i32| h.to_string()).collect();
        let minutes: Vec<String> = (0..60).map(|m: i32| m.to_string()).collect();
        let text = format!("FREQ=DAILY;BYHOUR={};BYMINUTE={}", hours.join(","), minutes.join(","));
        let rule = Rule::parse(&text).expect("a valid rule");
        let all: Vec<Timestamp> = rule.occurrences(&tz, start, None).take(4 * 1440).collect();
        prop_assert_eq!(all.len(), 4 * 1440);
        check_spacing(&all)?;
        let mut per_day: BTreeMap<Date, usize> = BTreeMap::new();
        for at in &all {
            *per_day.entry(local(&tz, *at).date()).or_default() += 1;
        }
        prop_assert!(per_day.values().all(|&n| n <= 1440), "{:?}", per_day);
    }
}
