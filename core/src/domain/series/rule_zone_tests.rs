//! Tests of a rule in a zone with transitions (DST, half-hour shifts, a skipped day): New
//! York, Paris, Lord Howe, Chatham and Samoa. A daily rule gives one occurrence on every local
//! day, a wall time in a gap is shifted forward by the gap, a repeated one comes once (the
//! first), and the instants always come in order.

use jiff::civil::{Date, Time};

use super::tests::{first, rule, t, zone};
use super::*;

/// Every occurrence of `text` in local `year`, checked to be one per local day.
fn one_a_day(text: &str, tz: &str, year: i16) -> Vec<Timestamp> {
    let tz = zone(tz);
    let local = |d: Date| tz.to_ambiguous_timestamp(d.to_datetime(Time::midnight()));
    let from = local(Date::new(year, 1, 1).unwrap()).compatible().unwrap();
    let to = local(Date::new(year + 1, 1, 1).unwrap())
        .compatible()
        .unwrap();
    let all: Vec<Timestamp> = rule(text)
        .occurrences(&tz, Timestamp::from_millis(from.as_millisecond()), None)
        .take_while(|at| at.as_millis() < to.as_millisecond())
        .collect();
    let days: std::collections::BTreeSet<Date> = all
        .iter()
        .map(|at| tz.to_datetime(jiff::Timestamp::from_millisecond(at.as_millis()).unwrap()))
        .map(|dt| dt.date())
        .collect();
    let in_year = Date::new(year, 12, 31).unwrap().day_of_year() as usize;
    assert_eq!(
        (all.len(), days.len()),
        (in_year, in_year),
        "{text} in {tz:?}"
    );
    all
}

fn has(all: &[Timestamp], at: &str) -> bool {
    all.contains(&t(at))
}

#[test]
fn daily_0230_in_new_york_once_a_day_through_both_changes() {
    let all = one_a_day("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "America/New_York", 2027);
    assert_eq!(all.len(), 365);
    // 02:30 does not exist on 14 March: shifted forward by the gap, 03:30 EDT.
    for at in [
        "2027-03-13T02:30:00-05:00",
        "2027-03-14T03:30:00-04:00",
        "2027-03-15T02:30:00-04:00",
        // Fall back repeats 01:00-02:00; 02:30 exists once, in EST.
        "2027-11-06T02:30:00-04:00",
        "2027-11-07T02:30:00-05:00",
        "2027-11-08T02:30:00-05:00",
    ] {
        assert!(has(&all, at), "{at}");
    }
    assert!(has(&all, "2027-03-14T07:30:00Z") && has(&all, "2027-11-07T07:30:00Z"));
}

#[test]
fn daily_0130_in_new_york_is_the_first_of_the_repeated_times() {
    let all = one_a_day("FREQ=DAILY;BYHOUR=1;BYMINUTE=30", "America/New_York", 2027);
    for at in [
        "2027-03-14T06:30:00Z",
        "2027-11-06T05:30:00Z",
        // 01:30 happens twice on 7 November: at 01:30 EDT, not again an hour later.
        "2027-11-07T05:30:00Z",
        "2027-11-08T06:30:00Z",
    ] {
        assert!(has(&all, at), "{at}");
    }
    assert!(!has(&all, "2027-11-07T06:30:00Z"));
}

#[test]
fn paris_lord_howe_and_chatham_once_a_day_through_both_changes() {
    let paris = one_a_day("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "Europe/Paris", 2027);
    for at in [
        "2027-03-27T02:30:00+01:00",
        "2027-03-28T03:30:00+02:00",
        "2027-03-29T02:30:00+02:00",
        "2027-10-30T02:30:00+02:00",
        "2027-10-31T02:30:00+02:00",
        "2027-11-01T02:30:00+01:00",
    ] {
        assert!(has(&paris, at), "{at}");
    }
    // Lord Howe moves half an hour: 02:00 → 02:30 on 3 October, 02:00 → 01:30 on 4 April.
    let spring = one_a_day(
        "FREQ=DAILY;BYHOUR=2;BYMINUTE=15",
        "Australia/Lord_Howe",
        2027,
    );
    for at in [
        "2027-10-02T02:15:00+10:30",
        "2027-10-03T02:45:00+11:00",
        "2027-10-04T02:15:00+11:00",
    ] {
        assert!(has(&spring, at), "{at}");
    }
    let autumn = one_a_day(
        "FREQ=DAILY;BYHOUR=1;BYMINUTE=45",
        "Australia/Lord_Howe",
        2027,
    );
    for at in [
        "2027-04-03T01:45:00+11:00",
        "2027-04-04T01:45:00+11:00",
        "2027-04-05T01:45:00+10:30",
    ] {
        assert!(has(&autumn, at), "{at}");
    }
    // Chatham changes at 02:45 standard time: 02:45 → 03:45 on 26 September, 03:45 → 02:45
    // on 4 April.
    let chatham = one_a_day("FREQ=DAILY;BYHOUR=3;BYMINUTE=0", "Pacific/Chatham", 2027);
    for at in [
        "2027-04-03T03:00:00+13:45",
        "2027-04-04T03:00:00+13:45",
        "2027-04-05T03:00:00+12:45",
        "2027-09-25T03:00:00+12:45",
        "2027-09-26T04:00:00+13:45",
        "2027-09-27T03:00:00+13:45",
    ] {
        assert!(has(&chatham, at), "{at}");
    }
}

#[test]
fn a_shifted_gap_time_meeting_a_real_one_comes_once_and_in_order() {
    let got = first(
        "FREQ=DAILY;BYHOUR=2,3;BYMINUTE=30",
        "America/New_York",
        "2027-03-13T00:00:00-05:00",
        5,
    );
    let want = [
        "2027-03-13T07:30:00Z",
        "2027-03-13T08:30:00Z",
        "2027-03-14T07:30:00Z",
        "2027-03-15T06:30:00Z",
        "2027-03-15T07:30:00Z",
    ];
    assert_eq!(got, want);
    // Wall order 02:15, 02:45, 03:15, 03:45 is instant order 03:15, 03:45 twice over.
    let got = first(
        "FREQ=DAILY;BYHOUR=2,3;BYMINUTE=15,45",
        "America/New_York",
        "2027-03-14T00:00:00-05:00",
        3,
    );
    let want = [
        "2027-03-14T07:15:00Z",
        "2027-03-14T07:45:00Z",
        "2027-03-15T06:15:00Z",
    ];
    assert_eq!(got, want);
}

#[test]
fn a_skipped_day_comes_once_and_in_order() {
    // Samoa skipped 30 December 2011 (-10:00 → +14:00): its wall times, shifted forward a
    // day, are 31 December's, which come after the period of the 30th is generated.
    let got = first(
        "FREQ=DAILY;BYHOUR=1,23;BYMINUTE=0",
        "Pacific/Apia",
        "2011-12-29T00:00:00-10:00",
        6,
    );
    let want = [
        "2011-12-29T11:00:00Z",
        "2011-12-30T09:00:00Z",
        "2011-12-30T11:00:00Z",
        "2011-12-31T09:00:00Z",
        "2011-12-31T11:00:00Z",
        "2012-01-01T09:00:00Z",
    ];
    assert_eq!(got, want);
}
