//! The library's rules for what applications ask (each decision in one home, the library): how
//! far ahead a reminder may be due, how long it may stay fresh, and that an edit which would
//! send nothing is refused. They hold in `reminder_writes`, for the API, `remindctl remind create` and
//! every other caller alike; before, only the API's body decoder held them.

use std::time::Duration;

use reminders::domain::{
    Channel, NewReminder, Recipient, ReminderError, Retention, MAX_DUE_AHEAD, MAX_FRESHNESS,
};
use reminders::ports::ReminderStore;
use reminders::reminder_writes::{self, Edit, Edited, WriteError};

use crate::harness::{message, reminder, test_config, Mem, T0};

fn new_reminder(id: &str, due_in: Duration, fresh_for: Duration) -> NewReminder {
    let r = reminder(id, &[Channel::Email]);
    NewReminder {
        reminder_id: r.reminder_id,
        subscriber_id: r.subscriber_id,
        due_at: T0.plus(due_in),
        fresh_until: Some(T0.plus(due_in).plus(fresh_for)),
        content: r.content,
        recipients: r.recipients.into_values().collect(),
    }
}

fn recipients(channels: &[Channel]) -> Vec<Recipient> {
    reminder("x", channels).recipients.into_values().collect()
}

#[tokio::test]
async fn create_holds_the_limits_for_every_caller_and_stores_nothing_refused() {
    let w = Mem::new(test_config(), true);
    let hour = Duration::from_secs(3600);
    let retention = Retention::default();
    let day = Duration::from_secs(86_400);
    let cases = [
        (
            "too-far",
            MAX_DUE_AHEAD + day,
            hour,
            ReminderError::DueTooFar,
        ),
        (
            "too-fresh",
            hour,
            MAX_FRESHNESS + day,
            ReminderError::FreshTooLong,
        ),
    ];
    for (id, due_in, fresh_for, want) in cases {
        let got = reminder_writes::create(
            &*w.store,
            new_reminder(id, due_in, fresh_for),
            hour,
            retention,
            T0,
        )
        .await;
        match got {
            Err(WriteError::Invalid(e)) => assert_eq!(e, want, "{id}"),
            other => panic!("{id}: {other:?}"),
        }
        let id = reminders::domain::ReminderId::parse(id).unwrap();
        assert!(w.store.get(&id).await.unwrap().is_none(), "nothing stored");
    }
    // At the limits exactly: accepted.
    let at_limits = new_reminder("at-limits", MAX_DUE_AHEAD, MAX_FRESHNESS);
    let created = reminder_writes::create(&*w.store, at_limits, hour, retention, T0).await;
    assert!(matches!(created, Ok(Some(_))), "{created:?}");
}

#[tokio::test]
async fn an_edit_that_moves_the_due_time_past_the_limit_is_refused() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("far-edit", &[Channel::Email]).await;
    let far = T0.plus(MAX_DUE_AHEAD + Duration::from_secs(60));
    let edit = Edit {
        due_at: Some(far),
        fresh_until: Some(far.plus(Duration::from_secs(3600))),
        ..Edit::default()
    };
    let got = w.edit(&r.reminder_id, edit).await;
    assert!(
        matches!(got, Err(WriteError::Invalid(ReminderError::DueTooFar))),
        "{got:?}"
    );
    let stored = w.store.get(&r.reminder_id).await.unwrap().unwrap();
    assert_eq!(stored.due_at, r.due_at, "unchanged");
}

/// Every channel of an enqueued reminder delivered: an edit that adds none would send nothing
/// and is refused; one that adds a channel is an edit.
#[tokio::test]
async fn an_edit_that_would_send_nothing_is_refused_and_one_that_adds_a_channel_is_not() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("nothing-left", &[Channel::Push]).await;
    let push = message(&r, Channel::Push);
    w.enqueue(&push).await;
    w.run(Channel::Push).await.unwrap();
    let rec = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(rec.status(), reminders::ledger::Status::Delivered);
    w.mark_enqueued(&r).await;
    let later = Edit {
        due_at: Some(r.due_at.plus(Duration::from_secs(600))),
        fresh_until: Some(r.fresh_until.plus(Duration::from_secs(600))),
        ..Edit::default()
    };
    let got = w.edit(&r.reminder_id, later).await.unwrap();
    assert_eq!(got, Edited::NothingLeft);
    let add = Edit {
        recipients: Some(recipients(&[Channel::Push, Channel::Email])),
        ..Edit::default()
    };
    let got = w.edit(&r.reminder_id, add).await.unwrap();
    assert!(matches!(got, Edited::Edited(_)), "{got:?}");
}

/// A reminder already stale by every clock when it arrives could only expire: refused, naming
/// the freshness, and nothing stored. The same reminder created while it was fresh and asked for
/// again later (its answer lost) answers as any repeat.
#[tokio::test]
async fn a_reminder_stale_on_arrival_is_refused_unless_it_is_a_repeat() {
    let w = Mem::new(test_config(), true);
    let hour = Duration::from_secs(3600);
    let stale = |id: &str| {
        let mut n = new_reminder(id, hour, hour);
        n.due_at = T0.minus(2 * hour);
        n.fresh_until = Some(T0.minus(hour));
        n
    };
    let got =
        reminder_writes::create(&*w.store, stale("late"), hour, Retention::default(), T0).await;
    assert!(
        matches!(got, Err(WriteError::Invalid(ReminderError::StaleAlready))),
        "{got:?}"
    );
    let id = reminders::domain::ReminderId::parse("late").unwrap();
    assert!(w.store.get(&id).await.unwrap().is_none(), "nothing stored");
    // Created three hours ago, while fresh; asked for again now.
    let earlier = T0.minus(3 * hour);
    let first = reminder_writes::create(
        &*w.store,
        stale("kept"),
        hour,
        Retention::default(),
        earlier,
    )
    .await;
    assert!(matches!(first, Ok(Some(_))), "{first:?}");
    let again =
        reminder_writes::create(&*w.store, stale("kept"), hour, Retention::default(), T0).await;
    assert!(matches!(again, Ok(None)), "a repeat: {again:?}");
}

/// An edit that would leave a fresh reminder stale (its freshness moved behind now) could only
/// make it expire: refused, naming the freshness, and the reminder stays as it was.
#[tokio::test]
async fn an_edit_that_would_make_a_fresh_reminder_stale_is_refused() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("made-stale", &[Channel::Email]).await;
    let hour = Duration::from_secs(3600);
    let edit = Edit {
        due_at: Some(T0.minus(2 * hour)),
        fresh_until: Some(T0.minus(hour)),
        ..Edit::default()
    };
    let got = w.edit(&r.reminder_id, edit).await;
    assert!(
        matches!(got, Err(WriteError::Invalid(ReminderError::StaleAlready))),
        "{got:?}"
    );
    let stored = w.store.get(&r.reminder_id).await.unwrap().unwrap();
    assert_eq!(stored.fresh_until, r.fresh_until, "unchanged");
}

/// A series' edit brings its occurrences in line even when that leaves one stale (it then
/// expires, as the series now says): only an application's own edit is refused.
#[tokio::test]
async fn a_series_edit_may_leave_an_occurrence_stale() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("series-made-stale", &[Channel::Email]).await;
    let hour = Duration::from_secs(3600);
    let edit = Edit {
        due_at: Some(T0.minus(2 * hour)),
        fresh_until: Some(T0.minus(hour)),
        may_make_stale: true,
        ..Edit::default()
    };
    let got = w.edit(&r.reminder_id, edit).await;
    assert!(matches!(got, Ok(Edited::Edited(_))), "{got:?}");
}
