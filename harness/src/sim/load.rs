//! The load a simulation runs: the one-off reminders (due at random in the window) and the
//! series of a series load, seeded into the store; how many deliveries that asks for; and,
//! at the end, what became of each of them. The ids (`r-{i}`, `v-{i}` and its occurrences) are
//! made here and read back here.

use std::time::Duration;

use crate::ManualClock;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use reminders_core::domain::{
    Channel, Content, DeadReason, NewReminder, Recipient, Reminder, ReminderId, ReminderStatus,
    SubscriberId,
};
use reminders_core::ledger::Status;
use reminders_core::ports::{MemoryLedger, MemoryQueue, MemoryReminderStore, ReminderStore};

use super::config::{SeriesLoad, SimConfig, EPOCH};
use super::seed::Stream;
use super::world::World;
use super::{recipients, report};

fn recipient(channel: Channel, i: u32) -> Recipient {
    let raw = match channel {
        Channel::Push => format!("device-{i:08}"),
        Channel::Email => format!("person{i}@example.com"),
        Channel::Sms => format!("+1415{:07}", i % 10_000_000),
    };
    // Built from fixed patterns that always validate.
    Recipient::parse(channel, &raw).unwrap_or_else(|_| unreachable!("sim recipient {raw}"))
}

/// The `i`th series of a series load: subscriber `v-{i}`, its channel round robin, from the
/// epoch to the end of the window.
pub fn load_series(
    cfg: &SimConfig,
    load: &SeriesLoad,
    i: u32,
) -> Result<reminders_core::domain::series::Series, reminders_core::domain::series::SeriesError> {
    use reminders_core::domain::series::{NewSeries, Series};
    let channel = cfg.channels[i as usize % cfg.channels.len().max(1)];
    let new = NewSeries {
        series_id: reminders_core::domain::SeriesId::parse(format!("v-{i:07}"))
            .unwrap_or_else(|_| unreachable!()),
        subscriber_id: SubscriberId::parse(format!("v-{i}")).unwrap_or_else(|_| unreachable!()),
        rule: load.rule.clone(),
        zone: load.zone.clone(),
        starts_at: EPOCH,
        until: Some(EPOCH.plus(cfg.window)),
        fresh_for: Some(cfg.freshness),
        content: Content::Text {
            subject: "Reminder".into(),
            body: "Your daily reminder".into(),
        },
        recipients: vec![recipient(channel, i)],
    };
    Series::new(new, cfg.freshness)
}

/// Deliveries the load asks for: the one-off reminders and every occurrence of the series
/// inside the window.
pub fn planned(cfg: &SimConfig) -> u64 {
    let occurrences = cfg.series.as_ref().map_or(0, |load| {
        load_series(cfg, load, 0).map_or(0, |s| s.instants_after(None).len() as u64)
            * u64::from(load.count)
    });
    u64::from(cfg.reminders) + occurrences
}

pub(super) async fn seed_reminders(w: &World, cfg: &SimConfig) {
    if cfg.recipient_rules {
        recipients::seed(&w.store, cfg.subscribers).await;
    }
    if let Some(load) = &cfg.series {
        for i in 0..load.count {
            if let Ok(s) = load_series(cfg, load, i) {
                let _ = reminders_core::ports::SeriesStore::put_series(
                    &*w.store,
                    &s,
                    reminders_core::ports::ExpectedSeries::Absent,
                )
                .await;
            }
        }
    }
    let mut rng = StdRng::seed_from_u64(Stream::Load.of(cfg.seed));
    let window_ms = cfg.window.as_millis().max(1) as u64;
    for i in 0..cfg.reminders {
        let channel = cfg.channels[i as usize % cfg.channels.len().max(1)];
        let due = EPOCH.plus(Duration::from_millis(rng.random_range(0..window_ms)));
        let reminder = Reminder::new(
            NewReminder {
                reminder_id: ReminderId::parse(format!("r-{i:07}"))
                    .unwrap_or_else(|_| unreachable!()),
                subscriber_id: SubscriberId::parse(format!("s-{}", i % cfg.subscribers.max(1)))
                    .unwrap_or_else(|_| unreachable!()),
                due_at: due,
                fresh_until: Some(due.plus(cfg.freshness)),
                content: Content::Text {
                    subject: "Reminder".into(),
                    body: "Your appointment is soon".into(),
                },
                recipients: vec![recipient(channel, i)],
            },
            cfg.freshness,
            reminders_core::domain::Retention::default().0,
        );
        if let Ok(r) = reminder {
            let _ = w.store.insert(&r).await;
        }
    }
}

/// Final status of each reminder's delivery: the ledger's, else the reminder's own.
pub(crate) async fn outcomes(
    w_store: &MemoryReminderStore,
    w_ledger: &MemoryLedger,
    dlq: &MemoryQueue<ManualClock>,
    cfg: &SimConfig,
) -> report::Outcomes {
    let mut o = report::Outcomes::default();
    let mut in_dlq = std::collections::BTreeMap::new();
    for channel in Channel::ALL {
        // The redrive library's read-only look: nothing is moved.
        if let Ok(msgs) = reminders_core::redrive::peek(dlq, channel, u32::MAX, 60).await {
            for m in msgs {
                if let Ok(msg) = reminders_core::domain::DeliveryMessage::decode(&m.message.body) {
                    in_dlq.insert(msg.delivery_key, m.letter.reason);
                }
            }
        }
    }
    // Each id made as it is read, and each record read by its key: a copy of a million of
    // either would be the largest thing in the process.
    let one_offs = (0..cfg.reminders).filter_map(|i| ReminderId::parse(format!("r-{i:07}")).ok());
    let series = cfg.series.iter().flat_map(|load| {
        (0..load.count)
            .filter_map(|i| load_series(cfg, load, i).ok())
            .flat_map(|s| {
                s.instants_after(None)
                    .into_iter()
                    .map(move |at| reminders_core::domain::series::occurrence_id(&s.series_id, at))
            })
    });
    for id in one_offs.chain(series) {
        let Ok(Some(r)) = w_store.get(&id).await else {
            // Never made (a maker that fell behind the window): not sent, still owed.
            if cfg.series.is_some() && reminders_core::domain::series::occurrence_of(&id).is_some()
            {
                o.pending += 1;
            }
            continue;
        };
        let Some(channel) = r.channels().next() else {
            continue;
        };
        let key =
            reminders_core::domain::DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
        let record = reminders_core::ports::Ledger::get(w_ledger, &key)
            .await
            .ok()
            .flatten();
        match record.map(|rec| (rec.status(), rec.dead_reason())) {
            Some((Status::Delivered, _)) => o.delivered += 1,
            Some((Status::Expired, _)) => o.expired += 1,
            Some((Status::Cancelled, _)) => o.cancelled += 1,
            Some((Status::Dead, reason)) => {
                *o.dead
                    .entry(reason.unwrap_or(DeadReason::Rejected))
                    .or_default() += 1
            }
            None if r.status == ReminderStatus::Expired => o.expired += 1,
            _ => match in_dlq.get(&key) {
                Some(reason) => *o.dead.entry(*reason).or_default() += 1,
                None => o.pending += 1,
            },
        }
    }
    o
}
