//! Tests of a rule's parts, one by one, against RFC 5545's own examples where it gives them:
//! `BYDAY` with ordinals, `BYSETPOS`, `INTERVAL` and `WKST`, `BYMONTHDAY` from the end, leap
//! days, yearly ordinals, `COUNT` and `UNTIL`, what the start supplies, rules that can never
//! match again, and the parser's errors and canonical text. How a rule meets a zone's
//! transitions is [`super::zone_tests`]; the helpers here serve both.

use super::*;

pub(super) fn zone(name: &str) -> TimeZone {
    jiff::tz::db()
        .get(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// An instant written with its offset, so each test says which side of a transition it means.
pub(super) fn t(rfc3339: &str) -> Timestamp {
    Timestamp::parse_rfc3339(rfc3339).unwrap_or_else(|| panic!("bad time {rfc3339}"))
}

pub(super) fn rule(text: &str) -> Rule {
    Rule::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The first `n` occurrences, in UTC (`2027-03-14T07:30:00Z`).
pub(super) fn first(text: &str, tz: &str, start: &str, n: usize) -> Vec<String> {
    between(text, tz, start, None, n)
}

pub(super) fn between(
    text: &str,
    tz: &str,
    start: &str,
    end: Option<&str>,
    n: usize,
) -> Vec<String> {
    rule(text)
        .occurrences(&zone(tz), t(start), end.map(t))
        .take(n)
        .map(utc)
        .collect()
}

pub(super) fn utc(at: Timestamp) -> String {
    jiff::Timestamp::from_millisecond(at.as_millis())
        .expect("in range")
        .to_string()
}

#[test]
fn last_friday_of_each_month() {
    let got = between(
        "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=9;BYMINUTE=0",
        "UTC",
        "2027-01-01T00:00:00Z",
        Some("2027-12-31T23:59:59Z"),
        100,
    );
    let days = [
        "01-29", "02-26", "03-26", "04-30", "05-28", "06-25", "07-30", "08-27", "09-24", "10-29",
        "11-26", "12-31",
    ];
    let want: Vec<String> = days.iter().map(|d| format!("2027-{d}T09:00:00Z")).collect();
    assert_eq!(got, want);
}

#[test]
fn count_until_and_end_each_end_the_series_inclusively() {
    let start = "2027-01-01T09:00:00Z";
    let daily = |text: &str, end: Option<&str>| between(text, "UTC", start, end, 100).len();
    assert_eq!(daily("FREQ=DAILY;COUNT=5", None), 5);
    assert_eq!(daily("FREQ=DAILY;UNTIL=20270105T090000Z", None), 5);
    assert_eq!(daily("FREQ=DAILY;UNTIL=20270105", None), 5);
    assert_eq!(daily("FREQ=DAILY", Some("2027-01-05T09:00:00Z")), 5);
    assert_eq!(daily("FREQ=DAILY", Some("2027-01-05T08:59:59Z")), 4);
    // The earlier of the two wins, whichever it is.
    let until = "FREQ=DAILY;UNTIL=20270105T090000Z";
    assert_eq!(daily(until, Some("2027-01-03T09:00:00Z")), 3);
    assert_eq!(daily(until, Some("2027-01-07T09:00:00Z")), 5);
    // COUNT counts from the first occurrence at or after the start.
    let got = between(
        "FREQ=DAILY;COUNT=2",
        "UTC",
        "2027-01-01T09:00:00.001Z",
        None,
        9,
    );
    assert_eq!(got, ["2027-01-02T09:00:00Z", "2027-01-03T09:00:00Z"]);
    assert_eq!(daily("FREQ=DAILY", Some("2026-12-31T00:00:00Z")), 0);
}

#[test]
fn weekdays_at_0915_in_paris() {
    let text = "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=15";
    let got = first(text, "Europe/Paris", "2027-01-04T00:00:00Z", 7);
    let days = ["04", "05", "06", "07", "08", "11", "12"];
    let want: Vec<String> = days
        .iter()
        .map(|d| format!("2027-01-{d}T08:15:00Z"))
        .collect();
    assert_eq!(got, want);
    let got = first(text, "Europe/Paris", "2027-03-26T00:00:00Z", 2);
    assert_eq!(got, ["2027-03-26T08:15:00Z", "2027-03-29T07:15:00Z"]);
    let got = first(text, "Europe/Paris", "2027-07-10T00:00:00Z", 1);
    assert_eq!(got, ["2027-07-12T07:15:00Z"]);
}

#[test]
fn bysetpos_picks_within_each_period() {
    let got = between(
        "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
        "UTC",
        "2027-01-01T12:00:00Z",
        Some("2027-12-31T23:59:59Z"),
        100,
    );
    let days = [
        "01-29", "02-26", "03-31", "04-30", "05-31", "06-30", "07-30", "08-31", "09-30", "10-29",
        "11-30", "12-31",
    ];
    let want: Vec<String> = days.iter().map(|d| format!("2027-{d}T12:00:00Z")).collect();
    assert_eq!(got, want);
    // RFC 5545's examples, from DTSTART 1997-09-04 09:00 in New York.
    let ny = |text: &str, n| first(text, "America/New_York", "1997-09-04T09:00:00-04:00", n);
    let got = ny("FREQ=MONTHLY;COUNT=3;BYDAY=TU,WE,TH;BYSETPOS=3", 9);
    assert_eq!(
        got,
        [
            "1997-09-04T13:00:00Z",
            "1997-10-07T13:00:00Z",
            "1997-11-06T14:00:00Z"
        ]
    );
    let got = ny("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-2", 3);
    assert_eq!(
        got,
        [
            "1997-09-29T13:00:00Z",
            "1997-10-30T14:00:00Z",
            "1997-11-27T14:00:00Z"
        ]
    );
    // The position is taken over the whole period, then the start cuts: January's first
    // Monday (the 4th) is before the start, and no later Monday of January is "first".
    let got = first(
        "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1",
        "UTC",
        "2027-01-15T00:00:00Z",
        1,
    );
    assert_eq!(got, ["2027-02-01T00:00:00Z"]);
}

#[test]
fn every_other_week_counts_weeks_from_wkst() {
    // RFC 5545: the week boundary decides which Sunday is in the start's week.
    let ny = |text: &str| first(text, "America/New_York", "1997-08-05T09:00:00-04:00", 9);
    let days = |ds: [&str; 4]| -> Vec<String> {
        ds.iter()
            .map(|d| format!("1997-08-{d}T13:00:00Z"))
            .collect()
    };
    let monday = ny("FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=MO");
    assert_eq!(monday, days(["05", "10", "19", "24"]));
    let sunday = ny("FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=SU");
    assert_eq!(sunday, days(["05", "17", "19", "31"]));
}

#[test]
fn month_days_count_from_the_end_and_skip_months_without_them() {
    let got = first(
        "FREQ=MONTHLY;BYMONTHDAY=-1",
        "UTC",
        "2028-01-01T08:00:00Z",
        3,
    );
    assert_eq!(
        got,
        [
            "2028-01-31T08:00:00Z",
            "2028-02-29T08:00:00Z",
            "2028-03-31T08:00:00Z"
        ]
    );
    let got = first(
        "FREQ=MONTHLY;BYMONTHDAY=31",
        "UTC",
        "2027-01-01T08:00:00Z",
        7,
    );
    let days = ["01", "03", "05", "07", "08", "10", "12"];
    let want: Vec<String> = days
        .iter()
        .map(|m| format!("2027-{m}-31T08:00:00Z"))
        .collect();
    assert_eq!(got, want);
    // Without BYMONTHDAY, the start's day; a month without it is skipped, never clamped.
    let got = first("FREQ=MONTHLY", "UTC", "2027-01-30T08:00:00Z", 3);
    assert_eq!(
        got,
        [
            "2027-01-30T08:00:00Z",
            "2027-03-30T08:00:00Z",
            "2027-04-30T08:00:00Z"
        ]
    );
    // RFC 5545: every Friday the 13th, BYDAY limiting BYMONTHDAY.
    let got = first(
        "FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13",
        "America/New_York",
        "1997-09-02T09:00:00-04:00",
        5,
    );
    let want = [
        "1998-02-13T14:00:00Z",
        "1998-03-13T14:00:00Z",
        "1998-11-13T14:00:00Z",
        "1999-08-13T13:00:00Z",
        "2000-10-13T13:00:00Z",
    ];
    assert_eq!(got, want);
}

#[test]
fn leap_days_come_in_leap_years_and_the_series_ends_or_goes_on() {
    let text = "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29";
    let got = first(text, "UTC", "2027-01-01T10:00:00Z", 3);
    let want = [
        "2028-02-29T10:00:00Z",
        "2032-02-29T10:00:00Z",
        "2036-02-29T10:00:00Z",
    ];
    assert_eq!(got, want);
    // 2100 is not a leap year: eight years apart.
    let got = first(text, "UTC", "2096-01-01T10:00:00Z", 2);
    assert_eq!(got, ["2096-02-29T10:00:00Z", "2104-02-29T10:00:00Z"]);
    let got = first(&format!("{text};COUNT=2"), "UTC", "2027-01-01T10:00:00Z", 9);
    assert_eq!(got.len(), 2);
    let got = first(
        &format!("{text};UNTIL=20310101"),
        "UTC",
        "2027-01-01T10:00:00Z",
        9,
    );
    assert_eq!(got, ["2028-02-29T10:00:00Z"]);
    // From a start on the 29th, FREQ=YEARLY alone is the same series.
    let got = first("FREQ=YEARLY", "UTC", "2028-02-29T10:00:00Z", 2);
    assert_eq!(got, ["2028-02-29T10:00:00Z", "2032-02-29T10:00:00Z"]);
}

#[test]
fn yearly_ordinals_count_in_the_year_or_in_bymonth() {
    let ny = |text: &str, start: &str, n| first(text, "America/New_York", start, n);
    let got = ny("FREQ=YEARLY;BYDAY=20MO", "1997-05-19T09:00:00-04:00", 3);
    let want = [
        "1997-05-19T13:00:00Z",
        "1998-05-18T13:00:00Z",
        "1999-05-17T13:00:00Z",
    ];
    assert_eq!(got, want);
    let got = ny(
        "FREQ=YEARLY;BYMONTH=3;BYDAY=TH",
        "1997-03-13T09:00:00-05:00",
        5,
    );
    let want = [
        "1997-03-13",
        "1997-03-20",
        "1997-03-27",
        "1998-03-05",
        "1998-03-12",
    ];
    let want: Vec<String> = want.iter().map(|d| format!("{d}T14:00:00Z")).collect();
    assert_eq!(got, want);
    let got = ny(
        "FREQ=YEARLY;BYMONTH=1,7;BYDAY=-1SU",
        "2027-01-01T09:00:00-05:00",
        3,
    );
    let want = [
        "2027-01-31T14:00:00Z",
        "2027-07-25T13:00:00Z",
        "2028-01-30T14:00:00Z",
    ];
    assert_eq!(got, want);
}

#[test]
fn the_start_gives_the_seconds_and_what_the_rule_leaves_open() {
    let start = "2027-01-06T09:15:30.250Z"; // a Wednesday
    let got = first("FREQ=DAILY", "UTC", start, 1);
    assert_eq!(got, ["2027-01-07T09:15:30Z"]);
    let got = first("FREQ=DAILY;BYHOUR=10", "UTC", start, 1);
    assert_eq!(got, ["2027-01-06T10:15:30Z"]);
    let got = first("FREQ=WEEKLY", "UTC", start, 2);
    assert_eq!(got, ["2027-01-13T09:15:30Z", "2027-01-20T09:15:30Z"]);
    let got = first("FREQ=YEARLY;BYMONTH=3", "UTC", start, 1);
    assert_eq!(got, ["2027-03-06T09:15:30Z"]);
}

#[test]
fn rules_that_can_never_match_again_end() {
    let monday = t("2027-01-04T09:00:00Z");
    for text in [
        "FREQ=MONTHLY;BYDAY=5MO;BYMONTHDAY=1",
        "FREQ=DAILY;INTERVAL=7;BYDAY=TU",
        "FREQ=WEEKLY;BYDAY=MO;BYSETPOS=2",
        "FREQ=YEARLY;BYDAY=1MO;BYMONTHDAY=8",
    ] {
        assert_eq!(
            rule(text).occurrences(&TimeZone::UTC, monday, None).next(),
            None,
            "{text}"
        );
    }
    let on_the_30th = t("2027-01-30T09:00:00Z");
    let feb = rule("FREQ=YEARLY;BYMONTH=2");
    assert_eq!(
        feb.occurrences(&TimeZone::UTC, on_the_30th, None).next(),
        None
    );
}

#[test]
fn parse_errors_name_the_part() {
    for (text, part) in [
        ("FREQ=HOURLY", "FREQ"),
        ("FREQ=DAILY;BYSECOND=5", "BYSECOND"),
        ("FREQ=DAILY;BYWEEKNO=5", "BYWEEKNO"),
        ("FREQ=WEEKLY;BYDAY=1MO", "BYDAY"),
        ("FREQ=MONTHLY;BYDAY=6MO", "BYDAY"),
        ("FREQ=YEARLY;BYMONTH=1;BYDAY=-6MO", "BYDAY"),
        ("FREQ=YEARLY;BYDAY=54MO", "BYDAY"),
        ("FREQ=MONTHLY;BYDAY=0MO", "BYDAY"),
        ("FREQ=MONTHLY;BYDAY=XX", "BYDAY"),
        ("FREQ=DAILY;COUNT=2;UNTIL=20270101T000000Z", "UNTIL"),
        ("FREQ=DAILY;UNTIL=20270101T000000", "UNTIL"),
        ("FREQ=DAILY;UNTIL=20270230", "UNTIL"),
        ("FREQ=DAILY;UNTIL=2027010\u{e9}", "UNTIL"),
        ("FREQ=WEEKLY;BYMONTHDAY=1", "BYMONTHDAY"),
        ("FREQ=MONTHLY;BYMONTHDAY=30;BYMONTH=2", "BYMONTHDAY"),
        ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=-30", "BYMONTHDAY"),
        ("FREQ=DAILY;BYMONTHDAY=0", "BYMONTHDAY"),
        ("FREQ=DAILY;BYMONTHDAY=1,,2", "BYMONTHDAY"),
        ("BYDAY=MO", "FREQ"),
        ("FREQ=DAILY;FREQ=DAILY", "FREQ"),
        ("FREQ=", "FREQ"),
        ("FREQ=DAILY;BYHOUR=24", "BYHOUR"),
        ("FREQ=DAILY;BYHOUR=99999999999999", "BYHOUR"),
        ("FREQ=DAILY;BYHOUR=+1", "BYHOUR"),
        ("FREQ=DAILY;BYMINUTE=60", "BYMINUTE"),
        ("FREQ=DAILY;INTERVAL=0", "INTERVAL"),
        ("FREQ=DAILY;INTERVAL=1001", "INTERVAL"),
        ("FREQ=DAILY;COUNT=10001", "COUNT"),
        ("FREQ=DAILY;BYSETPOS=1", "BYSETPOS"),
        ("FREQ=DAILY;BYHOUR=9;BYSETPOS=367", "BYSETPOS"),
        ("FREQ=DAILY;WKST=XX", "WKST"),
        ("FREQ=DAILY;X-FOO=1", "X-FOO"),
        ("", "rule"),
        ("RRULE:", "rule"),
        ("FREQ=DAILY;", "rule"),
        ("FREQ=DAILY;=1", "rule"),
    ] {
        let err = Rule::parse(text).expect_err(text);
        assert_eq!(err.part, part, "{text}: {err}");
    }
    let err = Rule::parse("FREQ=WEEKLY;BYDAY=1MO").unwrap_err();
    assert!(err.to_string().starts_with("rule part BYDAY: "), "{err}");
    assert!(Rule::parse(&"FREQ=DAILY;".repeat(500)).is_err());
}

#[test]
fn parse_takes_any_case_and_order_and_as_text_is_canonical() {
    let r = rule("rrule:byminute=15;byhour=9;byday=fr,mo,mo;freq=weekly;wkst=mo");
    assert_eq!(r.as_text(), "FREQ=WEEKLY;BYDAY=MO,FR;BYHOUR=9;BYMINUTE=15");
    assert_eq!(r.freq(), Freq::Weekly);
    let r = rule("FREQ=DAILY;UNTIL=20270105");
    assert_eq!(r.until(), Some(t("2027-01-05T23:59:59Z")));
    assert_eq!(r.as_text(), "FREQ=DAILY;UNTIL=20270105T235959Z");
    assert_eq!(rule("FREQ=DAILY;COUNT=3").count(), Some(3));
    for text in [
        "FREQ=DAILY",
        "FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=SU",
        "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-2,1",
        "FREQ=MONTHLY;BYMONTHDAY=-31,-1,1,31;BYHOUR=0,23;BYMINUTE=0,59",
        "FREQ=YEARLY;UNTIL=20301231T120000Z;BYMONTH=1,12;BYDAY=MO,-1MO,2TU",
        "FREQ=YEARLY;BYDAY=53MO,-53SU",
    ] {
        let r = rule(text);
        assert_eq!(r.as_text(), text);
        assert_eq!(Rule::parse(&r.as_text()), Ok(r));
    }
    assert_eq!(
        rule("FREQ=MONTHLY;BYDAY=+2TU").as_text(),
        "FREQ=MONTHLY;BYDAY=2TU"
    );
}
