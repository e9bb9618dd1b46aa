//! A year of series through the maker on a virtual clock: the schedule's runs, one a minute,
//! played as the `ManualClock` reaches each run at which the maker's index has the series due. A
//! daily 02:30 in New York makes 365 occurrences, one on each local date, both DST days included;
//! a monthly `-1FR` in Sydney makes one on each month's last Friday. `until` and `COUNT` each
//! bring the series to `ended`: it leaves the maker's index and a PUT of it is refused.

use std::collections::BTreeSet;
use std::time::Duration;

use reminders::clock::{Clock, Timestamp};
use reminders::domain::series::{occurrence_id, NewSeries, Series, SeriesStatus};
use reminders::domain::{Access, Channel, Content, Recipient, Retention, SeriesId, SubscriberId};
use reminders::ports::series::make_at;
use reminders::ports::{
    MemoryLedger, MemoryReminderStore, ReminderStore, SeriesStore, SubscriberIndex,
};
use reminders::series::{self, Put, Refused};
use reminders_harness::ManualClock;

const MINUTE: i64 = 60_000;

fn ms(rfc3339: &str) -> Timestamp {
    let t: jiff::Timestamp = rfc3339.parse().unwrap();
    Timestamp::from_millis(t.as_millisecond())
}

fn new_series(
    id: &str,
    rule: &str,
    zone: &str,
    starts_at: Timestamp,
    until: Option<Timestamp>,
) -> Series {
    let new = NewSeries {
        series_id: SeriesId::parse(id).unwrap(),
        subscriber_id: SubscriberId::parse(format!("u-{id}")).unwrap(),
        rule: rule.into(),
        zone: zone.into(),
        starts_at,
        until,
        fresh_for: Some(Duration::from_secs(1800)),
        content: Content::Text {
            subject: "Pill".into(),
            body: "take it".into(),
        },
        recipients: vec![Recipient::parse(Channel::Push, "device-token").unwrap()],
    };
    Series::new(new, Duration::from_secs(600)).unwrap()
}

/// What the maker made over the series' life: each occurrence with the run that made it.
struct Life {
    made: Vec<(Timestamp, Timestamp)>,
    created: u32,
    last: Series,
}

/// Create `s` at `now` through the library's put, then play the schedule: each run at the
/// first minute at or after the maker's index has the series due, until it has left the
/// index. Every run's new occurrences are noted with the run's time.
async fn live(
    store: &MemoryReminderStore,
    ledger: &MemoryLedger,
    s: Series,
    now: Timestamp,
) -> Life {
    let clock = ManualClock::at(now);
    let retention = Retention::default();
    let id = s.series_id.clone();
    let put = series::put(store, ledger, &Access::Any, s, clock.now(), retention)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(put, Put::Created(_)), "{put:?}");
    let mut made = Vec::new();
    let mut created = 0;
    for _ in 0..2_000 {
        let before = store.get_series(&id).await.unwrap().unwrap();
        let Some(due) = make_at(&before) else {
            return Life {
                made,
                created,
                last: before,
            };
        };
        let at = due.as_millis().max(clock.now().as_millis() + 1);
        clock.set(Timestamp::from_millis((at + MINUTE - 1) / MINUTE * MINUTE));
        let report = series::make_due(store, ledger, clock.now(), retention).await;
        assert_eq!(report.failed, 0, "{report:?}");
        created += report.made;
        let after = store.get_series(&id).await.unwrap().unwrap();
        for t in after.made.iter().filter(|t| !before.made.contains(t)) {
            made.push((*t, clock.now()));
        }
    }
    panic!("the series never left the maker's index")
}

/// The subscriber's reminders, all pages.
async fn reminders_of(store: &MemoryReminderStore, subscriber: &SubscriberId) -> usize {
    let (mut n, mut after) = (0, None);
    loop {
        let page = store
            .by_subscriber(subscriber, after.as_ref(), 100)
            .await
            .unwrap();
        n += page.items.len();
        match page.next {
            Some(next) => after = Some(next),
            None => return n,
        }
    }
}

/// Ended: out of the maker's index for good, and a PUT of it (the same body or another)
/// refused as final: the API's 409.
async fn assert_ended(
    store: &MemoryReminderStore,
    ledger: &MemoryLedger,
    s: &Series,
    now: Timestamp,
) {
    assert_eq!(s.status, SeriesStatus::Ended, "{s:?}");
    assert_eq!(make_at(s), None);
    let far = now.plus(Duration::from_secs(5 * 365 * 86_400));
    let due = store.series_due(far, 100).await.unwrap();
    assert!(due.iter().all(|d| d.series_id != s.series_id), "{due:?}");
    let mut same = s.clone();
    same.status = SeriesStatus::Active;
    let mut other = same.clone();
    other.content = Content::Text {
        subject: "Pill".into(),
        body: "again".into(),
    };
    for wanted in [same, other] {
        let put = series::put(
            store,
            ledger,
            &Access::Any,
            wanted,
            now,
            Retention::default(),
        )
        .await
        .unwrap();
        assert_eq!(put, Err(Refused::Final(SeriesStatus::Ended)));
    }
}

#[tokio::test]
async fn a_year_of_a_daily_0230_in_new_york_through_the_maker() {
    let store = MemoryReminderStore::new(4);
    let ledger = MemoryLedger::default();
    // 2027 in New York: from its first midnight to its last instant (the body's until).
    let s = new_series(
        "pill",
        "FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
        "America/New_York",
        ms("2027-01-01T05:00:00Z"),
        Some(ms("2028-01-01T04:59:59Z")),
    );
    let life = live(&store, &ledger, s.clone(), ms("2026-12-31T12:00:00Z")).await;
    assert_eq!(life.made.len(), 365);
    assert_eq!(life.created, 365);
    assert_eq!(reminders_of(&store, &s.subscriber_id).await, 365);
    let mut dates = BTreeSet::new();
    for (at, run) in &life.made {
        // Made ahead by more than a scheduler period (a minute): sub-minute precision holds.
        assert!(
            run.plus(Duration::from_secs(60)) <= *at,
            "{at} made at {run}"
        );
        assert!(store
            .get(&occurrence_id(&s.series_id, *at))
            .await
            .unwrap()
            .is_some());
        let wall = s.wall_time(*at);
        assert!(
            wall.contains("T02:30:00") || wall == "2027-03-14T03:30:00-04:00[America/New_York]",
            "{wall}"
        );
        dates.insert(wall[..10].to_owned());
    }
    let mut day = jiff::civil::date(2027, 1, 1);
    let mut year = BTreeSet::new();
    while day.year() == 2027 {
        year.insert(day.to_string());
        day = day.tomorrow().unwrap();
    }
    assert_eq!(dates, year, "one on each local date of 2027");
    // Spring forward: 02:30 does not exist, so 03:30 EDT; fall back: 02:30 EST, once.
    let instants: BTreeSet<Timestamp> = life.made.iter().map(|(at, _)| *at).collect();
    assert!(instants.contains(&ms("2027-03-14T07:30:00Z")), "14 March");
    assert!(instants.contains(&ms("2027-11-07T07:30:00Z")), "7 November");
    assert_ended(&store, &ledger, &life.last, ms("2028-01-02T00:00:00Z")).await;
}

#[tokio::test]
async fn a_monthly_last_friday_in_sydney_through_the_maker_ends_at_its_count() {
    let store = MemoryReminderStore::new(4);
    let ledger = MemoryLedger::default();
    // From Sydney's 2027 New Year (UTC+11); COUNT=12 ends it with the year.
    let s = new_series(
        "rent",
        "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0;COUNT=12",
        "Australia/Sydney",
        ms("2026-12-31T13:00:00Z"),
        None,
    );
    let life = live(&store, &ledger, s.clone(), ms("2026-12-31T12:00:00Z")).await;
    let walls: Vec<String> = life.made.iter().map(|(at, _)| s.wall_time(*at)).collect();
    // The last Friday of each month of 2027, at 17:00 in Sydney (AEDT +11 to 4 April and
    // from 3 October, AEST +10 between).
    let expected = [
        "2027-01-29T17:00:00+11:00",
        "2027-02-26T17:00:00+11:00",
        "2027-03-26T17:00:00+11:00",
        "2027-04-30T17:00:00+10:00",
        "2027-05-28T17:00:00+10:00",
        "2027-06-25T17:00:00+10:00",
        "2027-07-30T17:00:00+10:00",
        "2027-08-27T17:00:00+10:00",
        "2027-09-24T17:00:00+10:00",
        "2027-10-29T17:00:00+11:00",
        "2027-11-26T17:00:00+11:00",
        "2027-12-31T17:00:00+11:00",
    ]
    .map(|w| format!("{w}[Australia/Sydney]"));
    assert_eq!(walls, expected);
    assert_eq!(life.created, 12);
    assert_eq!(reminders_of(&store, &s.subscriber_id).await, 12);
    for (at, run) in &life.made {
        assert!(
            run.plus(Duration::from_secs(60)) <= *at,
            "{at} made at {run}"
        );
    }
    assert_ended(&store, &ledger, &life.last, ms("2028-01-01T00:00:00Z")).await;
}
