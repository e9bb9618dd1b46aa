use proptest::prelude::*;

use super::*;

/// An instant written with its local offset, so each test says which side of a transition
/// it means.
fn t(rfc3339: &str) -> Timestamp {
    Timestamp::parse_rfc3339(rfc3339).unwrap_or_else(|| panic!("bad time {rfc3339}"))
}

fn quiet(start: &str, end: &str, zone: &str) -> QuietHours {
    QuietHours {
        start: LocalTime::parse(start).unwrap(),
        end: LocalTime::parse(end).unwrap(),
        zone: Zone::parse(zone).unwrap(),
    }
}

const HOUR: i64 = 3_600_000;

#[test]
fn local_times_are_exactly_hh_mm() {
    assert_eq!(LocalTime::parse("22:00"), LocalTime::new(22, 0));
    assert_eq!(LocalTime::parse("07:05").unwrap().to_string(), "07:05");
    assert_eq!(LocalTime::parse("00:00").unwrap().to_string(), "00:00");
    assert_eq!(LocalTime::parse("23:59").unwrap().to_string(), "23:59");
    for bad in [
        "24:00",
        "7:00",
        "07:60",
        "0700",
        "07:00:00",
        "",
        "ab:cd",
        "+7:00",
        "07-00",
        "٠٧:٠٠",
    ] {
        assert_eq!(LocalTime::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn zones_come_from_the_bundled_database_under_their_canonical_names() {
    assert_eq!(Zone::parse("Europe/Paris").unwrap().name(), "Europe/Paris");
    assert_eq!(Zone::parse("europe/paris").unwrap().name(), "Europe/Paris");
    assert_eq!(Zone::parse("UTC").unwrap().name(), "UTC");
    assert!(Zone::parse("Asia/Kolkata").is_some());
    for bad in [
        "",
        "Mars/Olympus_Mons",
        "+05:30",
        "Europe/Paris ",
        "CET-1CEST",
    ] {
        assert!(Zone::parse(bad).is_none(), "{bad:?}");
    }
    assert!(Zone::parse(&"A".repeat(65)).is_none());
    assert_eq!(
        format!("{:?}", Zone::parse("Asia/Kolkata").unwrap()),
        "Zone(Asia/Kolkata)"
    );
}

#[test]
fn the_issues_example_is_held_until_seven_the_next_morning() {
    let q = quiet("22:00", "07:00", "Europe/Paris");
    assert_eq!(
        q.hold_until(t("2026-06-10T23:30:00+02:00")),
        Some(t("2026-06-11T07:00:00+02:00"))
    );
    // After midnight the window is the previous night's.
    assert_eq!(
        q.hold_until(t("2026-06-11T03:00:00+02:00")),
        Some(t("2026-06-11T07:00:00+02:00"))
    );
}

#[test]
fn start_is_inclusive_and_end_exclusive() {
    let q = quiet("22:00", "07:00", "Europe/Paris");
    assert_eq!(q.hold_until(t("2026-06-10T21:59:59.999+02:00")), None);
    assert_eq!(
        q.hold_until(t("2026-06-10T22:00:00+02:00")),
        Some(t("2026-06-11T07:00:00+02:00"))
    );
    assert_eq!(
        q.hold_until(t("2026-06-11T06:59:59.999+02:00")),
        Some(t("2026-06-11T07:00:00+02:00"))
    );
    assert_eq!(q.hold_until(t("2026-06-11T07:00:00+02:00")), None);
    assert_eq!(q.hold_until(t("2026-06-11T12:00:00+02:00")), None);
}

#[test]
fn a_window_within_one_day_and_an_empty_one() {
    let lunch = quiet("12:00", "14:00", "America/New_York");
    assert_eq!(
        lunch.hold_until(t("2026-06-10T13:30:00-04:00")),
        Some(t("2026-06-10T14:00:00-04:00"))
    );
    assert_eq!(lunch.hold_until(t("2026-06-10T11:00:00-04:00")), None);
    assert_eq!(lunch.hold_until(t("2026-06-10T23:00:00-04:00")), None);
    let none = quiet("08:00", "08:00", "America/New_York");
    for at in ["2026-06-10T08:00:00-04:00", "2026-06-10T20:00:00-04:00"] {
        assert_eq!(none.hold_until(t(at)), None, "{at}");
    }
}

#[test]
fn a_night_across_spring_forward_ends_at_the_new_offsets_seven() {
    // New York, 2026-03-08: 02:00 EST becomes 03:00 EDT, so the night is an hour shorter.
    let q = quiet("22:00", "07:00", "America/New_York");
    let at = t("2026-03-07T23:30:00-05:00");
    let until = q.hold_until(at).unwrap();
    assert_eq!(until, t("2026-03-08T07:00:00-04:00"));
    assert_eq!(until.as_millis() - at.as_millis(), 13 * HOUR / 2);
    // Paris, 2026-03-29: 02:00 CET becomes 03:00 CEST.
    let q = quiet("22:00", "07:00", "Europe/Paris");
    assert_eq!(
        q.hold_until(t("2026-03-28T23:30:00+01:00")),
        Some(t("2026-03-29T07:00:00+02:00"))
    );
}

#[test]
fn an_end_skipped_by_spring_forward_is_the_first_instant_after_the_gap() {
    let q = quiet("23:00", "02:30", "Europe/Paris");
    assert_eq!(
        q.hold_until(t("2026-03-29T01:45:00+01:00")),
        Some(t("2026-03-29T03:00:00+02:00"))
    );
    // The instant the clock jumps is outside: its local time is 03:00.
    assert_eq!(q.hold_until(t("2026-03-29T03:00:00+02:00")), None);
    // A start skipped by the gap starts the window at the same first instant.
    let q = quiet("02:30", "06:00", "America/New_York");
    assert_eq!(q.hold_until(t("2026-03-08T01:59:00-05:00")), None);
    assert_eq!(
        q.hold_until(t("2026-03-08T03:00:00-04:00")),
        Some(t("2026-03-08T06:00:00-04:00"))
    );
    // 02:45–02:30 (all day but a quarter hour): both ends of the night of the 7th fall in the
    // gap, so the night of the 8th starts where the 7th's ends, and the hold runs to its end.
    let q = quiet("02:45", "02:30", "America/New_York");
    let at = t("2026-03-08T01:00:00-05:00");
    let until = q.hold_until(at).unwrap();
    assert_eq!(until, t("2026-03-09T02:30:00-04:00"));
    assert_eq!(until.as_millis() - at.as_millis(), 49 * HOUR / 2);
    // Both ends in the gap: the clock never shows the window that night.
    let q = quiet("02:10", "02:50", "America/New_York");
    assert_eq!(q.hold_until(t("2026-03-08T03:00:00-04:00")), None);
    assert!(q.hold_until(t("2026-03-09T02:20:00-04:00")).is_some());
}

#[test]
fn a_night_across_fall_back_ends_at_the_new_offsets_seven() {
    // New York, 2026-11-01: 02:00 EDT becomes 01:00 EST, so the night is an hour longer.
    let q = quiet("22:00", "07:00", "America/New_York");
    let at = t("2026-10-31T23:30:00-04:00");
    let until = q.hold_until(at).unwrap();
    assert_eq!(until, t("2026-11-01T07:00:00-05:00"));
    assert_eq!(until.as_millis() - at.as_millis(), 17 * HOUR / 2);
    // Paris, 2026-10-25: 03:00 CEST becomes 02:00 CET.
    let q = quiet("22:00", "07:00", "Europe/Paris");
    assert_eq!(
        q.hold_until(t("2026-10-24T23:30:00+02:00")),
        Some(t("2026-10-25T07:00:00+01:00"))
    );
}

#[test]
fn an_end_repeated_by_fall_back_is_its_earlier_instant() {
    let q = quiet("22:00", "01:30", "America/New_York");
    assert_eq!(
        q.hold_until(t("2026-10-31T23:00:00-04:00")),
        Some(t("2026-11-01T01:30:00-04:00"))
    );
    // The repeated 01:00–01:30 (EST) is after the window's end: it is not quiet.
    assert_eq!(q.hold_until(t("2026-11-01T01:10:00-05:00")), None);
    // A start in the repeated hour starts at its first pass, so the second is inside.
    let q = quiet("01:30", "07:00", "America/New_York");
    assert_eq!(
        q.hold_until(t("2026-11-01T01:10:00-05:00")),
        Some(t("2026-11-01T07:00:00-05:00")),
        "the second 01:10 follows the first 01:30"
    );
    let q = quiet("02:30", "07:00", "Europe/Paris");
    assert_eq!(
        q.hold_until(t("2026-10-25T02:10:00+01:00")),
        Some(t("2026-10-25T07:00:00+01:00")),
        "the second 02:10 follows the first 02:30"
    );
}

#[test]
fn half_hour_offsets_without_and_with_daylight_saving() {
    let q = quiet("22:00", "07:00", "Asia/Kolkata");
    assert_eq!(
        q.hold_until(t("2026-01-15T23:30:00+05:30")),
        Some(t("2026-01-16T07:00:00+05:30"))
    );
    assert_eq!(q.hold_until(t("2026-01-15T21:59:00+05:30")), None);
    // Adelaide leaves daylight saving on 2026-04-05 (03:00 ACDT, +10:30, becomes 02:00 ACST,
    // +09:30) and enters it on 2026-10-04 (02:00 ACST becomes 03:00 ACDT).
    let q = quiet("22:00", "07:00", "Australia/Adelaide");
    let at = t("2026-04-04T23:30:00+10:30");
    let until = q.hold_until(at).unwrap();
    assert_eq!(until, t("2026-04-05T07:00:00+09:30"));
    assert_eq!(until.as_millis() - at.as_millis(), 17 * HOUR / 2);
    assert_eq!(
        q.hold_until(t("2026-10-03T23:30:00+09:30")),
        Some(t("2026-10-04T07:00:00+10:30"))
    );
    let q = quiet("22:00", "02:30", "Australia/Adelaide");
    assert_eq!(
        q.hold_until(t("2026-10-03T23:00:00+09:30")),
        Some(t("2026-10-04T03:00:00+10:30"))
    );
}

#[test]
fn instants_beyond_the_calendar_are_never_quiet() {
    let q = quiet("00:00", "23:59", "UTC");
    assert_eq!(q.hold_until(Timestamp::from_millis(i64::MAX)), None);
    assert_eq!(q.hold_until(Timestamp::from_millis(i64::MIN)), None);
    assert!(!q.contains(Timestamp::from_millis(i64::MAX)));
}

/// Zones with one-hour, half-hour and no daylight saving, and transitions at midnight.
const ZONES: [&str; 9] = [
    "Europe/Paris",
    "America/New_York",
    "Asia/Kolkata",
    "Australia/Adelaide",
    "Australia/Lord_Howe",
    "America/St_Johns",
    "America/Santiago",
    "Asia/Kathmandu",
    "UTC",
];

fn any_quiet_hours() -> impl Strategy<Value = QuietHours> {
    (0..1440u16, 0..1440u16, prop::sample::select(ZONES.to_vec())).prop_map(|(s, e, z)| {
        QuietHours {
            start: LocalTime(s),
            end: LocalTime(e),
            zone: Zone::parse(z).unwrap(),
        }
    })
}

/// 2025 to 2028, to the millisecond.
fn any_instant() -> impl Strategy<Value = Timestamp> {
    (1_735_689_600_000i64..1_861_920_000_000).prop_map(Timestamp::from_millis)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn held_until_the_first_instant_outside_and_within_a_day(
        q in any_quiet_hours(),
        at in any_instant(),
    ) {
        match q.hold_until(at) {
            None => prop_assert!(!q.contains(at)),
            Some(until) => {
                prop_assert!(q.contains(at));
                prop_assert!(until > at);
                prop_assert!(!q.contains(until), "{} is inside", until.to_rfc3339());
                prop_assert!(until.as_millis() - at.as_millis() <= 25 * HOUR);
                // No earlier way out: the instants in between are all quiet.
                let span = until.as_millis() - at.as_millis();
                for k in 1..16 {
                    let between = Timestamp::from_millis(at.as_millis() + span * k / 16);
                    prop_assert!(q.contains(between), "{} is outside", between.to_rfc3339());
                }
            }
        }
    }

    #[test]
    fn without_daylight_saving_the_window_is_the_clock_reading(
        s in 0..1440u16,
        e in 0..1440u16,
        kolkata in any::<bool>(),
        at in any_instant(),
    ) {
        let (zone, offset_min) = if kolkata { ("Asia/Kolkata", 330) } else { ("UTC", 0) };
        let q = QuietHours { start: LocalTime(s), end: LocalTime(e), zone: Zone::parse(zone).unwrap() };
        let minute_of_day = |t: Timestamp| ((t.as_millis() / 60_000 + offset_min).rem_euclid(1440)) as u16;
        let m = minute_of_day(at);
        let inside = if s <= e { s <= m && m < e } else { m >= s || m < e };
        prop_assert_eq!(q.contains(at), inside);
        if let Some(until) = q.hold_until(at) {
            prop_assert_eq!(minute_of_day(until), e);
            prop_assert_eq!(until.as_millis() % 60_000, 0);
        }
    }
}
