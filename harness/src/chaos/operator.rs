//! The operator's side of a world: redrives of every reason, now and then and two at once, a
//! cancel racing some; cancels and invalid items at random moments; a redrive a few minutes
//! after a death an edit answered. Each call is an invocation a crash can stop.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rand::RngExt;

use super::dice::invoke;
use super::dice::API_TIMEOUT;
use super::seed::{Seed, Stream};
use super::world::{recipient, World, CHAOS};
use reminders_core::clock::Clock;
use reminders_core::domain::{
    Channel, Content, DeadReason, DeliveryKey, NewReminder, Reminder, ReminderId, Retention,
    SubscriberId,
};
use reminders_core::redrive::{RedriveConfig, RedriveRequest, Redriver};
use reminders_core::reminder_writes;
use reminders_core::sync::lock;

/// The chaos operator's redrive of `channel`'s DLQ for `reasons`: any time of death, twenty
/// messages at ten a second, no note, nothing extended, no duplicate accepted.
fn request(channel: Channel, reasons: BTreeSet<DeadReason>) -> RedriveRequest {
    RedriveRequest {
        channel,
        reasons,
        first_seen_after: None,
        first_seen_before: None,
        dead_after: None,
        dead_before: None,
        max_messages: 20,
        max_per_second: 10,
        dry_run: false,
        operator: "chaos".into(),
        note: String::new(),
        extend_freshness_secs: None,
        accept_duplicates: false,
    }
}

/// An operator's redrive of `channel`'s DLQ, every reason, `after` from now.
pub(super) async fn redrive_later(
    world: Arc<World>,
    channel: Channel,
    after: Duration,
    extend_freshness_secs: Option<u64>,
) {
    tokio::time::sleep(after).await;
    let cfg = RedriveConfig {
        retention: world.retention,
        ..RedriveConfig::default()
    };
    let redriver = Redriver::new(
        world.ports.clone(),
        cfg,
        world.seed.of(Stream::LaterRedrives),
    );
    let req = RedriveRequest {
        note: "after a chain took over".into(),
        extend_freshness_secs,
        accept_duplicates: true,
        ..request(channel, DeadReason::ALL.into_iter().collect())
    };
    // A run that crashed, failed or failed a copy is run again, as an operator would, up to
    // three times (past the DLQ's visibility timeout too: a crashed run's receive hides its
    // copies).
    for wait in [30, 120, 300] {
        let deadline = world.clock.now().plus(Duration::from_secs(60));
        let out = invoke(redriver.run(&req, Some(deadline)), Duration::from_secs(90)).await;
        let done = |s: &reminders_core::redrive::RedriveSummary| {
            s.by_reason.values().all(|c| c.failed == 0)
        };
        if matches!(&out, Some(Ok(s)) if done(s)) {
            return;
        }
        tokio::time::sleep(Duration::from_secs(wait)).await;
    }
}

/// An operator redriving a channel's DLQ now and then, during the faults: any reasons, and
/// sometimes a cancel of a reminder at the same moment.
/// `seed` is the redriver's: the world's, or the twin's ([`Stream::TwinRedriver`]).
pub(super) async fn redrives(world: Arc<World>, seed: Seed) {
    let cfg = RedriveConfig {
        retention: world.retention,
        ..RedriveConfig::default()
    };
    let redriver = Redriver::new(world.ports.clone(), cfg, seed.0);
    let mut rng = seed.rng(Stream::Redrives);
    let mut added = seed.rng(Stream::RedrivesCancels);
    while !world.dice.is_calm() {
        tokio::time::sleep(Duration::from_secs(rng.random_range(300..1_200))).await;
        let channel = Channel::ALL[rng.random_range(0..3)];
        // A reason added since the worlds were calibrated draws from its own dice, so the
        // operator's other choices stay as they were.
        let reasons: BTreeSet<DeadReason> = DeadReason::ALL
            .into_iter()
            .filter(|r| match r {
                DeadReason::CountryNotAllowed => added.random_bool(0.6),
                _ => rng.random_bool(0.6),
            })
            .collect();
        let accept_duplicates = reasons.contains(&DeadReason::Ambiguous);
        let req = RedriveRequest {
            extend_freshness_secs: rng.random_bool(0.3).then_some(900),
            accept_duplicates,
            ..request(channel, reasons)
        };
        let deadline = world.clock.now().plus(Duration::from_secs(60));
        let run = invoke(redriver.run(&req, Some(deadline)), Duration::from_secs(90));
        let racing = rng
            .random_bool(0.3)
            .then(|| rng.random_range(0..world.ids.len().max(1)));
        match racing.and_then(|i| world.ids.get(i)) {
            Some(id) => {
                world.counts.racing_cancels();
                let _ = tokio::join!(run, cancel(&world, id));
            }
            None => {
                let _ = run.await;
            }
        }
    }
}

/// Cancels and invalid items at random moments of the fault phase.
pub(super) async fn operator(world: Arc<World>) {
    let mut rng = world.seed.rng(Stream::Operator);
    let mut at: Vec<u64> = (0..world.shape.ops)
        .map(|_| rng.random_range(0..CHAOS.as_secs()))
        .collect();
    at.sort_unstable();
    let mut elapsed = 0;
    for t in at {
        tokio::time::sleep(Duration::from_secs(t - elapsed)).await;
        elapsed = t;
        let Some(id) = world.ids.get(rng.random_range(0..world.ids.len().max(1))) else {
            return;
        };
        if rng.random_bool(0.7) {
            cancel(&world, id).await;
        } else {
            // An invalid item written mid-run, as another application might: never due
            // (fresh until before its due time). The scheduler must quarantine it.
            invalid_item(&world, t).await;
        }
    }
}

/// The API's DELETE: asked (whatever comes of it), and what its answer settled told the
/// journal.
async fn cancel(world: &World, id: &ReminderId) {
    lock(&world.cancel_requests).insert(id.clone());
    let now = world.clock.now();
    let ports = &world.ports;
    let call = reminder_writes::cancel(&ports.reminders, &ports.ledger, id, now, world.retention);
    if let Some(answer) = invoke(call, API_TIMEOUT).await {
        heard(world, id, answer).await;
    }
}

/// Tell the journal which deliveries an answered cancel settled: a send that starts after
/// this is a send after the cancel, whatever the ledger came to say.
pub(super) async fn heard(
    world: &World,
    id: &ReminderId,
    answer: Result<Option<reminder_writes::CancelReport>, reminder_writes::WriteError>,
) {
    use reminders_core::delivery::Cancelled;
    use reminders_core::ledger::Status;
    use reminders_core::ports::ReminderStore;
    let Ok(Some(report)) = answer else {
        return;
    };
    let Ok(Some(r)) = world.store.get(id).await else {
        return;
    };
    let now = world.clock.now();
    for (channel, answer) in report.deliveries {
        let settled = matches!(
            answer,
            Cancelled::Cancelled | Cancelled::AlreadyFinal(Status::Cancelled | Status::Expired)
        );
        if settled {
            let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
            world.journal.cancel_answered(&key, now);
        }
    }
}

/// A stored item no reminder API would write: fresh until before it is due.
pub(super) async fn invalid_item(world: &World, t: u64) {
    use reminders_core::ports::ReminderStore;
    let Ok(id) = ReminderId::parse(format!("bad-{t}")) else {
        return;
    };
    let due = world.clock.now().plus(Duration::from_secs(30));
    let new = NewReminder {
        reminder_id: id.clone(),
        subscriber_id: SubscriberId::parse("s-bad").unwrap_or_else(|_| unreachable!()),
        due_at: due,
        fresh_until: Some(due.plus(Duration::from_secs(60))),
        content: Content::Text {
            subject: "Reminder".into(),
            body: "bad".into(),
        },
        recipients: vec![recipient(Channel::Sms, 9_999)],
    };
    let Ok(mut r) = Reminder::new(new, Duration::from_secs(3600), Retention::default().0) else {
        return;
    };
    r.fresh_until = due.minus(Duration::from_secs(1));
    if world.store.insert(&r).await.is_ok() {
        reminders_core::sync::lock(&world.invalid_ids).insert(id);
    }
}
