use super::*;
use crate::domain::series::occurrence_of;
use crate::domain::ReminderId;

#[test]
fn an_occurrence_id_names_its_series_and_instant() {
    let s = SeriesId::parse("standup-u42").unwrap();
    let at = Timestamp::from_millis(1_799_050_500_000);
    let id = occurrence_id(&s, at);
    assert_eq!(id.as_str(), "standup-u42::20270104T081500Z");
    assert_eq!(occurrence_of(&id), Some((s, at)));
    assert_eq!(occurrence_of(&ReminderId::parse("r-1").unwrap()), None);
    assert_eq!(occurrence_of(&ReminderId::parse("a::b").unwrap()), None);
}

#[test]
fn the_latest_occurrences_made_are_kept() {
    let mut s = sample();
    for i in 0..(MADE_KEPT as i64 + 5) {
        s.remember(Timestamp::from_millis(i * 1000));
    }
    assert_eq!(s.made.len(), MADE_KEPT);
    assert_eq!(s.made[0], Timestamp::from_millis(5000));
}

fn sample() -> Series {
    let new = NewSeries {
        series_id: SeriesId::parse("s").unwrap(),
        subscriber_id: SubscriberId::parse("u").unwrap(),
        rule: "FREQ=DAILY".into(),
        zone: "Europe/Paris".into(),
        starts_at: Timestamp::from_millis(0),
        until: None,
        fresh_for: None,
        content: Content::Text {
            subject: "s".into(),
            body: "b".into(),
        },
        recipients: vec![Recipient::parse(Channel::Push, "tok").unwrap()],
    };
    Series::new(new, Duration::from_secs(600)).unwrap()
}

#[test]
fn bad_fields_are_named() {
    let mut new = NewSeries {
        zone: "Mars/Olympus".into(),
        ..base()
    };
    let e = Series::new(new.clone(), Duration::from_secs(60)).unwrap_err();
    assert_eq!(e.field(), "zone");
    new.zone = "UTC".into();
    new.rule = "FREQ=HOURLY".into();
    assert_eq!(
        Series::new(new.clone(), Duration::from_secs(60))
            .unwrap_err()
            .field(),
        "rule"
    );
    new.rule = "FREQ=DAILY;UNTIL=20270101T000000Z".into();
    new.until = Some(Timestamp::from_millis(1));
    assert_eq!(
        Series::new(new, Duration::from_secs(60))
            .unwrap_err()
            .field(),
        "until"
    );
}

fn base() -> NewSeries {
    NewSeries {
        series_id: SeriesId::parse("s").unwrap(),
        subscriber_id: SubscriberId::parse("u").unwrap(),
        rule: "FREQ=DAILY".into(),
        zone: "UTC".into(),
        starts_at: Timestamp::from_millis(0),
        until: None,
        fresh_for: None,
        content: Content::Text {
            subject: "s".into(),
            body: "b".into(),
        },
        recipients: vec![Recipient::parse(Channel::Push, "tok").unwrap()],
    }
}
