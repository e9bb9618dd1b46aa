//! An occurrence whose delivery died (a DLQ copy left) and that an acknowledged series edit or
//! cancel then no longer makes: ended for good. A later redrive of its dead letter refuses it
//! (never a send at the old time as well as the new), and the occurrence reads cancelled.

use std::collections::BTreeSet;
use std::time::Duration;

use reminders::clock::Clock;
use reminders::domain::{Access, DeadReason, ReminderStatus, Retention, SeriesId};
use reminders::ledger::Status;
use reminders::ports::Ledger;
use reminders::redrive::{RedriveConfig, RedriveRequest, RedriveSummary, Redriver};
use reminders::series::{self, Put};
use reminders_harness::scripted::Answer;

use super::{key, play, put, standup, status, world, World};

async fn redrive(w: &World, extend_freshness_secs: Option<u64>) -> RedriveSummary {
    let req = RedriveRequest {
        channel: reminders::domain::Channel::Push,
        reasons: [DeadReason::Rejected].into_iter().collect::<BTreeSet<_>>(),
        first_seen_after: None,
        first_seen_before: None,
        dead_after: None,
        dead_before: None,
        max_messages: 10,
        max_per_second: 1000,
        dry_run: false,
        operator: "ana".into(),
        note: "provider fixed".into(),
        extend_freshness_secs,
        accept_duplicates: false,
    };
    let cfg = RedriveConfig {
        hold_secs: 60,
        ..RedriveConfig::default()
    };
    Redriver::new(w.ports.clone(), cfg, 5)
        .run(&req, None)
        .await
        .unwrap()
}

/// 22:05 made and sent, rejected by the provider at once: dead, with a DLQ copy. Now 22:06.
async fn dead(w: &World, fresh_for: Duration) {
    let s = standup("FREQ=DAILY;BYHOUR=22;BYMINUTE=5,8", fresh_for);
    assert!(matches!(put(w, s).await, Put::Created(_)));
    w.push.script_for(&key(5), [Answer::Permanent]);
    play(w, Duration::from_secs(6 * 60)).await;
    let rec = w
        .ledger
        .get(&key(5))
        .await
        .unwrap()
        .expect("22:05 on the ledger");
    assert_eq!(rec.status(), Status::Dead, "22:05 died rejected");
    assert_eq!(w.push.calls_for(&key(5)), 1);
}

/// The checks every case makes once the redrive ran: refused (left out of the queue), no
/// second provider call for 22:05, and the occurrence and its delivery read cancelled.
async fn refused_for_good(w: &World, summary: &RedriveSummary) {
    let total = summary.total();
    assert_eq!(total.moved, 0, "22:05 revived: {summary:?}");
    // Like a cancelled reminder's: out of the DLQ, counted skipped, never resent.
    assert_eq!((total.skipped, total.refused), (1, 0), "{summary:?}");
    play(w, Duration::from_secs(10 * 60)).await;
    assert_eq!(
        w.push.calls_for(&key(5)),
        1,
        "22:05 sent again after the edit"
    );
    assert_eq!(status(w, 5).await, Some(ReminderStatus::Cancelled));
    let rec = w.ledger.get(&key(5)).await.unwrap().unwrap();
    assert_eq!(rec.status(), Status::Cancelled, "{:?}", rec.history());
}

#[tokio::test(start_paused = true)]
async fn a_dead_occurrence_an_edit_moved_is_not_redriven_and_the_new_time_goes_once() {
    let w = world();
    dead(&w, Duration::from_secs(600)).await;
    // Moved: 22:05 becomes 22:07.
    let edited = standup(
        "FREQ=DAILY;BYHOUR=22;BYMINUTE=7,8",
        Duration::from_secs(600),
    );
    assert!(matches!(put(&w, edited).await, Put::Edited(_)));
    play(&w, Duration::from_secs(2 * 60)).await;
    assert_eq!(w.push.sends_for(&key(7)), 1, "22:07 sent");
    let summary = redrive(&w, None).await;
    refused_for_good(&w, &summary).await;
    assert_eq!(w.push.sends_for(&key(7)), 1, "22:07 once");
    assert_eq!(w.push.sends_for(&key(8)), 1, "22:08 once");
}

#[tokio::test(start_paused = true)]
async fn a_dead_occurrence_of_a_cancelled_series_is_not_redriven() {
    let w = world();
    dead(&w, Duration::from_secs(600)).await;
    let now = w.clock.now();
    let id = SeriesId::parse("standup").unwrap();
    series::cancel(
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
    let summary = redrive(&w, None).await;
    refused_for_good(&w, &summary).await;
    assert_eq!(w.push.calls_for(&key(8)), 0, "22:08 after the cancel");
}

/// Stale by the time of the edit (fresh for a minute), so the edit's window of instants to
/// bring in line (those still fresh) left it out; the operator's redrive extends freshness.
#[tokio::test(start_paused = true)]
async fn a_stale_dead_occurrence_an_edit_moved_is_not_revived_by_a_redrive_that_extends_freshness()
{
    let w = world();
    dead(&w, Duration::from_secs(60)).await;
    play(&w, Duration::from_secs(60)).await;
    let edited = standup("FREQ=DAILY;BYHOUR=22;BYMINUTE=8,9", Duration::from_secs(60));
    assert!(matches!(put(&w, edited).await, Put::Edited(_)));
    let summary = redrive(&w, Some(600)).await;
    refused_for_good(&w, &summary).await;
    assert_eq!(w.push.sends_for(&key(8)), 1, "22:08 once");
    assert_eq!(w.push.sends_for(&key(9)), 1, "22:09 once");
}

/// The same without the extension: before, the redrive left it stale in the DLQ and the
/// occurrence read enqueued with a dead delivery, though the edit had removed it.
#[tokio::test(start_paused = true)]
async fn a_stale_dead_occurrence_an_edit_removed_reads_cancelled_after_a_redrive() {
    let w = world();
    dead(&w, Duration::from_secs(60)).await;
    play(&w, Duration::from_secs(60)).await;
    let edited = standup("FREQ=DAILY;BYHOUR=22;BYMINUTE=8", Duration::from_secs(60));
    assert!(matches!(put(&w, edited).await, Put::Edited(_)));
    let summary = redrive(&w, None).await;
    refused_for_good(&w, &summary).await;
    assert_eq!(w.push.sends_for(&key(8)), 1, "22:08 once");
}
