//! Recurring series (docs/design.md, "Recurring series") through the embedded pipeline: in-memory
//! ports on tokio's paused clock, the schedule (maker, then scan) and each channel's mapping
//! running as deployed. Each occurrence is an ordinary reminder, delivered once near its time; a
//! skip skips only it; an edit moves what is not yet enqueued; a cancel stops the series; a stopped
//! scheduler's missed occurrences expire, and the next goes at its own time, never bunched.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use reminders::clock::{Clock, Timestamp};
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::series::{occurrence_id, NewSeries, Series, SeriesStatus};
use reminders::domain::{
    Access, Channel, Content, DeliveryKey, PerChannel, Recipient, ReminderStatus, Retention,
    SeriesId, SubscriberId,
};
use reminders::ledger::Status;
use reminders::ports::{Ledger, MemoryLedger, MemoryReminderStore, ReminderStore, SeriesStore};
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders::series::{self, Put};
use reminders_harness::chaos::VirtualClock;
use reminders_harness::local::{run, LocalConfig, Stop};
use reminders_harness::stack::{MemoryPorts, MemoryStack};
use reminders_harness::ScriptedProvider;

mod erasure_race;
mod maker_clock;
mod reconcile_margin;
mod redriven;

/// 2027-01-15T08:00:00Z: 22:00 in Pacific/Kiritimati (UTC+14), far from UTC.
const EPOCH: Timestamp = Timestamp::from_millis(1_800_000_000_000);
const ZONE: &str = "Pacific/Kiritimati";

type Ports = MemoryPorts<VirtualClock, Arc<ScriptedProvider<VirtualClock>>>;

struct World {
    ports: Ports,
    clock: VirtualClock,
    store: Arc<MemoryReminderStore>,
    ledger: Arc<MemoryLedger>,
    push: Arc<ScriptedProvider<VirtualClock>>,
    scheduler: Scheduler<Ports>,
    consumer: Consumer<Ports>,
    urls: PerChannel<String>,
}

fn world() -> World {
    let stack = MemoryStack::on(VirtualClock::start(EPOCH));
    let push = Arc::new(ScriptedProvider::new(stack.clock, true));
    let ports = stack.ports(push.clone());
    let MemoryStack {
        clock,
        store,
        ledger,
        ..
    } = stack;
    let urls = PerChannel::from_fn(|c| format!("http://local/000000000000/q-{c}"));
    let consumer = Consumer::new(
        ports.clone(),
        ConsumerConfig {
            emit_metrics: false,
            ..ConsumerConfig::default()
        },
        urls.clone(),
        7,
    );
    World {
        ports: ports.clone(),
        clock,
        store,
        ledger,
        push,
        scheduler: Scheduler::new(ports, SchedulerConfig::default()),
        consumer,
        urls,
    }
}

fn standup(rule: &str, fresh_for: Duration) -> Series {
    let new = NewSeries {
        series_id: SeriesId::parse("standup").unwrap(),
        subscriber_id: SubscriberId::parse("u-42").unwrap(),
        rule: rule.into(),
        zone: ZONE.into(),
        starts_at: EPOCH,
        until: Some(EPOCH.plus(Duration::from_secs(3600))),
        fresh_for: Some(fresh_for),
        content: Content::Text {
            subject: "Standup".into(),
            body: "in 5 minutes".into(),
        },
        recipients: vec![Recipient::parse(Channel::Push, "device-token").unwrap()],
    };
    Series::new(new, Duration::from_secs(600)).unwrap()
}

fn at(min: u64) -> Timestamp {
    EPOCH.plus(Duration::from_secs(min * 60))
}

async fn put(w: &World, s: Series) -> Put {
    let now = w.clock.now();
    series::put(
        &*w.store,
        &*w.ledger,
        &Access::Any,
        s,
        now,
        Retention::default(),
    )
    .await
    .unwrap()
    .unwrap()
}

/// Play the deployed wiring for `d` of virtual time.
async fn play(w: &World, d: Duration) {
    let never = AtomicBool::new(false);
    let cfg = LocalConfig::default();
    run(
        &w.scheduler,
        &w.consumer,
        &w.urls,
        &cfg,
        Stop::For(d),
        &never,
        None,
    )
    .await
    .unwrap();
}

fn key(min: u64) -> DeliveryKey {
    let id = occurrence_id(&SeriesId::parse("standup").unwrap(), at(min));
    DeliveryKey::derive(&id, &SubscriberId::parse("u-42").unwrap(), Channel::Push)
}

/// When the ledger says the occurrence at `min` was delivered.
async fn delivered_at(w: &World, min: u64) -> Option<Timestamp> {
    let rec = w.ledger.get(&key(min)).await.unwrap()?;
    rec.history()
        .into_iter()
        .find(|(_, h)| h.to == Status::Delivered)
        .map(|(_, h)| h.at)
}

async fn status(w: &World, min: u64) -> Option<ReminderStatus> {
    let id = occurrence_id(&SeriesId::parse("standup").unwrap(), at(min));
    w.store.get(&id).await.unwrap().map(|r| r.status)
}

/// The series promise end to end, on memory: three occurrences a minute apart at 22:05, 22:06 and
/// 22:07 in Kiritimati (08:05Z…); the second skipped, the third moved by an edit to 22:09.
#[tokio::test(start_paused = true)]
async fn each_occurrence_once_on_time_a_skip_skips_one_and_an_edit_moves_the_third() {
    let w = world();
    let s = standup(
        "FREQ=DAILY;BYHOUR=22;BYMINUTE=5,6,7",
        Duration::from_secs(600),
    );
    assert!(matches!(put(&w, s).await, Put::Created(_)));
    // Made ahead, all three (within the make-ahead), as ordinary reminders.
    for m in [5, 6, 7] {
        assert_eq!(
            status(&w, m).await,
            Some(ReminderStatus::Scheduled),
            "22:0{m}"
        );
    }
    // Skip the second.
    let second = occurrence_id(&SeriesId::parse("standup").unwrap(), at(6));
    let now = w.clock.now();
    reminders::reminder_writes::cancel(&*w.store, &*w.ledger, &second, now, Retention::default())
        .await
        .unwrap()
        .unwrap();
    // Move the third: the edit's rule no longer makes 22:07 and makes 22:09.
    let edited = standup(
        "FREQ=DAILY;BYHOUR=22;BYMINUTE=5,6,9",
        Duration::from_secs(600),
    );
    assert!(matches!(put(&w, edited).await, Put::Edited(_)));
    assert_eq!(status(&w, 7).await, Some(ReminderStatus::Cancelled));
    assert_eq!(status(&w, 9).await, Some(ReminderStatus::Scheduled));
    assert_eq!(
        status(&w, 6).await,
        Some(ReminderStatus::Cancelled),
        "a skip stays skipped"
    );

    play(&w, Duration::from_secs(15 * 60)).await;
    for m in [5, 9] {
        let sent = delivered_at(&w, m).await.expect("delivered");
        let late = sent.since(at(m));
        assert!(
            sent >= at(m) && late <= Duration::from_secs(2),
            "22:0{m} sent {late:?} late"
        );
        assert_eq!(w.push.sends_for(&key(m)), 1, "22:0{m} once");
    }
    for m in [6, 7] {
        assert_eq!(w.push.calls_for(&key(m)), 0, "22:0{m} never sent");
    }
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_series_sends_nothing_more() {
    let w = world();
    let s = standup(
        "FREQ=DAILY;BYHOUR=22;BYMINUTE=5,6,7,8,9",
        Duration::from_secs(600),
    );
    put(&w, s).await;
    play(&w, Duration::from_secs(6 * 60 + 30)).await;
    let now = w.clock.now();
    let id = SeriesId::parse("standup").unwrap();
    let (cancelled, cancels) = series::cancel(
        &*w.store,
        &*w.ledger,
        &Access::Any,
        &id,
        now,
        Retention::default(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(cancelled.status, SeriesStatus::Cancelled);
    assert!(cancels.len() >= 3, "22:07 to 22:09 cancelled: {cancels:?}");
    play(&w, Duration::from_secs(10 * 60)).await;
    for m in [5, 6] {
        assert_eq!(
            w.push.sends_for(&key(m)),
            1,
            "22:0{m} went before the cancel"
        );
    }
    for m in [7, 8, 9] {
        assert_eq!(w.push.calls_for(&key(m)), 0, "22:0{m} after the cancel");
        assert_eq!(status(&w, m).await, Some(ReminderStatus::Cancelled));
    }
    let stored = w.store.get_series(&id).await.unwrap().unwrap();
    assert_eq!(stored.status, SeriesStatus::Cancelled);
}

/// A scheduler stopped over three occurrences: each ends `expired` (stale before it could go),
/// and the next goes at its own time, never bunched with them.
#[tokio::test(start_paused = true)]
async fn a_stopped_scheduler_expires_what_it_missed_and_the_next_goes_on_time() {
    let w = world();
    let s = standup(
        "FREQ=DAILY;BYHOUR=22;BYMINUTE=5,10,15,20,25",
        Duration::from_secs(60),
    );
    put(&w, s).await;
    // Stopped until 22:17.
    w.clock.sleep(Duration::from_secs(17 * 60)).await;
    play(&w, Duration::from_secs(12 * 60)).await;
    for m in [5, 10, 15] {
        assert_eq!(
            status(&w, m).await,
            Some(ReminderStatus::Expired),
            "22:{m:02}"
        );
        assert_eq!(w.push.calls_for(&key(m)), 0, "22:{m:02} never sent stale");
        let rec = w
            .ledger
            .get(&key(m))
            .await
            .unwrap()
            .expect("its expiry is on the ledger");
        assert_eq!(rec.status(), Status::Expired);
    }
    for m in [20, 25] {
        let sent = delivered_at(&w, m).await.expect("delivered");
        let late = sent.since(at(m));
        assert!(
            sent >= at(m) && late <= Duration::from_secs(2),
            "22:{m} sent {late:?} late"
        );
    }
}

/// A second maker, or a retry after a crash, with the same reading of the series makes
/// nothing again: it reads the series as stored (the index may lag), and each occurrence's
/// create is conditional on its id.
#[tokio::test(start_paused = true)]
async fn a_second_maker_with_the_same_reading_makes_nothing_again() {
    let w = world();
    let s = standup(
        "FREQ=DAILY;BYHOUR=22;BYMINUTE=5,6,7",
        Duration::from_secs(600),
    );
    w.store
        .put_series(&s, reminders::ports::ExpectedSeries::Absent)
        .await
        .unwrap();
    let now = w.clock.now();
    let mut report = series::MakeReport::default();
    for _ in 0..2 {
        let snapshot = s.clone();
        series::make_one(
            &*w.store,
            &*w.ledger,
            snapshot,
            now,
            Retention::default(),
            &mut report,
        )
        .await
        .unwrap();
    }
    assert_eq!((report.made, report.existed), (3, 0), "{report:?}");
    // The occurrences exist once each, whoever tries again.
    for m in [5, 6, 7] {
        let again = s.occurrence(at(m), Retention::default());
        assert_eq!(
            w.store.insert(&again).await.unwrap(),
            reminders::ports::Inserted::AlreadyExists
        );
    }
    let stored = w.store.get_series(&s.series_id).await.unwrap().unwrap();
    assert_eq!(stored.made, vec![at(5), at(6), at(7)]);
    assert_eq!(
        stored.status,
        SeriesStatus::Active,
        "made, but still to come: not ended yet"
    );
    let again = series::make_due(&*w.store, &*w.ledger, now, Retention::default()).await;
    assert_eq!(again.made, 0, "{again:?}");
}

/// The subscriber's preferences set with `zone`, as the API's PUT does (the series that
/// follow the subscriber re-aimed).
async fn set_zone(w: &World, zone: Option<&str>) {
    let sub = SubscriberId::parse("u-42").unwrap();
    let wire = reminders::domain::preferences::PreferencesWire {
        time_zone: zone.map(String::from),
        ..Default::default()
    };
    let prefs = reminders::domain::Preferences::try_from(wire).unwrap();
    w.store.put_preferences(&sub, &prefs).await.unwrap();
    series::follow_zone(&*w.store, &sub, zone).await.unwrap();
}

/// The zone `"subscriber"`: each occurrence is made in the subscriber's `time_zone` as read
/// when it is made, so a traveller's 09:30 follows them; one made stays where it was made; with
/// the zone gone (erased preferences) the last one read goes on; with none ever, refused.
#[tokio::test(start_paused = true)]
async fn a_series_in_the_subscriber_zone_follows_the_traveller() {
    let w = world();
    let sub = SubscriberId::parse("u-42").unwrap();
    let mut s = standup("FREQ=DAILY;BYHOUR=9;BYMINUTE=30", Duration::from_secs(600));
    s.zone = reminders::domain::series::SUBSCRIBER_ZONE.into();
    s.until = Some(EPOCH.plus(Duration::from_secs(3 * 86_400)));
    let now = w.clock.now();
    let refused = series::put(
        &*w.store,
        &*w.ledger,
        &Access::Any,
        s.clone(),
        now,
        Retention::default(),
    )
    .await
    .unwrap();
    assert_eq!(refused, Err(series::Refused::NoSubscriberZone));
    assert!(w.store.get_series(&s.series_id).await.unwrap().is_none());

    set_zone(&w, Some("Europe/Paris")).await;
    let Put::Created(made) = put(&w, s).await else {
        panic!("created")
    };
    assert_eq!(made.local_zone.as_deref(), Some("Europe/Paris"));
    // 09:30 in Paris (UTC+1) is 08:30Z, 30 minutes from the start.
    let paris = EPOCH.plus(Duration::from_secs(30 * 60));
    play(&w, Duration::from_secs(3600)).await;
    let id = |t: Timestamp| occurrence_id(&SeriesId::parse("standup").unwrap(), t);
    let sent_at = |t: Timestamp| {
        let key = DeliveryKey::derive(&id(t), &sub, Channel::Push);
        let ledger = w.ledger.clone();
        async move {
            let rec = ledger.get(&key).await.unwrap()?;
            rec.history()
                .into_iter()
                .find(|(_, h)| h.to == Status::Delivered)
                .map(|(_, h)| h.at)
        }
    };
    let first = sent_at(paris).await.expect("09:30 in Paris delivered");
    assert!(first.since(paris) <= Duration::from_secs(2), "{first}");

    // The subscriber flies to New York (UTC-5): 09:30 there is 14:30Z the same day.
    set_zone(&w, Some("America/New_York")).await;
    let new_york = EPOCH.plus(Duration::from_secs(6 * 3600 + 30 * 60));
    play(&w, Duration::from_secs(6 * 3600)).await;
    let second = sent_at(new_york)
        .await
        .expect("09:30 in New York delivered");
    assert!(second.since(new_york) <= Duration::from_secs(2), "{second}");
    let stored = w.store.get_series(&made.series_id).await.unwrap().unwrap();
    assert_eq!(stored.local_zone.as_deref(), Some("America/New_York"));
    assert_eq!(stored.made, vec![paris, new_york]);

    // Preferences erased: the last zone read goes on (New York's 09:30 the next day, never
    // Paris' again, nor UTC's).
    set_zone(&w, None).await;
    let next_day = new_york.plus(Duration::from_secs(86_400));
    let report = series::make_due(
        &*w.store,
        &*w.ledger,
        Timestamp::from_millis(next_day.as_millis() - 5 * 60_000),
        Retention::default(),
    )
    .await;
    assert_eq!(report.failed, 0, "{report:?}");
    let stored = w.store.get_series(&made.series_id).await.unwrap().unwrap();
    assert_eq!(stored.made.last(), Some(&next_day), "{:?}", stored.made);
    assert!(w
        .store
        .get(&id(paris.plus(Duration::from_secs(86_400))))
        .await
        .unwrap()
        .is_none());
}
