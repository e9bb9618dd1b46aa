//! Retention has one source: `RETENTION_SECS`, read by the consumer, the redrive function and
//! the application API alike. Changing it moves every TTL the system writes — reminders on
//! create and edit, ledger items on claim and delivery, expiry, cancel, dead letters of
//! unknown reminders, and redrive — by exactly the change.

use std::collections::BTreeSet;
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::config::Vars;
use reminders::consumer::ConsumerConfig;
use reminders::domain::{Channel, DeadReason, DeliveryKey, ReminderId, Retention};
use reminders::ledger::Status;
use reminders::ports::ReminderStore;
use reminders::redrive::{RedriveConfig, RedriveRequest, Redriver};
use reminders::reminder_writes::{self, Edit, Edited};
use reminders_harness::scripted::Answer;

use crate::harness::{message, reminder, Mem, T0};

/// Every TTL written in one pass over the system, by what wrote it.
async fn ttls_with(retention_secs: &str) -> Vec<(&'static str, i64, Timestamp)> {
    let lookup = |k: &str| (k == "RETENTION_SECS").then(|| retention_secs.to_owned());
    let cfg = ConsumerConfig {
        emit_metrics: false,
        ..ConsumerConfig::from_lookup(lookup).unwrap()
    };
    let redrive_cfg = RedriveConfig::from_lookup(lookup).unwrap();
    let retention = Retention::from_vars(&Vars::new(lookup)).unwrap();
    assert_eq!(cfg.retention, retention);
    assert_eq!(redrive_cfg.retention, retention);
    let mem = Mem::new(cfg, true);
    let mut ttls = Vec::new();

    // The application API: create, then edit.
    let new = reminder("ret-created", &[Channel::Email]);
    let fresh = new.fresh_until;
    let created = reminder_writes::create(
        &*mem.store,
        reminders::domain::NewReminder {
            reminder_id: new.reminder_id.clone(),
            subscriber_id: new.subscriber_id.clone(),
            due_at: new.due_at,
            fresh_until: Some(fresh),
            content: new.content.clone(),
            recipients: new.recipients.values().cloned().collect(),
        },
        Duration::from_secs(3600),
        retention,
        T0,
    )
    .await
    .unwrap()
    .unwrap();
    ttls.push(("reminder created", created.expires_at, fresh));
    let later = fresh.plus(Duration::from_secs(60));
    let changes = Edit {
        fresh_until: Some(later),
        ..Edit::default()
    };
    let Edited::Edited(edited) = reminder_writes::edit(
        &*mem.store,
        &*mem.ledger,
        &created.reminder_id,
        changes,
        T0,
        retention,
    )
    .await
    .unwrap() else {
        panic!("edit refused");
    };
    ttls.push(("reminder edited", edited.expires_at, later));

    // The consumer: a delivery, a permanent failure (dead), an unknown reminder.
    let delivered = mem.reminder("ret-delivered", &[Channel::Email]).await;
    let rejected = mem.reminder("ret-rejected", &[Channel::Sms]).await;
    mem.provider.script_for(
        &message(&rejected, Channel::Sms).delivery_key,
        [Answer::Permanent],
    );
    let unknown = message(&reminder("ret-unknown", &[Channel::Push]), Channel::Push);
    for (r, c) in [(&delivered, Channel::Email), (&rejected, Channel::Sms)] {
        mem.enqueue(&message(r, c)).await;
    }
    mem.enqueue(&unknown).await;
    for c in Channel::ALL {
        mem.run(c).await;
    }
    let ledger_ttl = |key: DeliveryKey, what: &'static str, status: Status| {
        let mem = &mem;
        async move {
            let rec = mem.record(&key).await.expect(what);
            assert_eq!(rec.status(), status, "{what}");
            rec.expires_at()
        }
    };
    let key = message(&delivered, Channel::Email).delivery_key;
    let fresh = delivered.fresh_until;
    ttls.push((
        "delivered",
        ledger_ttl(key, "delivered", Status::Delivered).await,
        fresh,
    ));
    let key = unknown.delivery_key.clone();
    let ttl = ledger_ttl(key, "unknown", Status::Dead).await;
    ttls.push(("unknown reminder", ttl, unknown.fresh_until));

    // Redrive of the dead one.
    let sms_key = message(&rejected, Channel::Sms).delivery_key;
    let dead_ttl = ledger_ttl(sms_key.clone(), "rejected", Status::Dead).await;
    ttls.push(("dead", dead_ttl, rejected.fresh_until));
    let redriver = Redriver::new(mem.consumer.ports().clone(), redrive_cfg, 1);
    let req = RedriveRequest {
        channel: Channel::Sms,
        reasons: BTreeSet::from([DeadReason::Rejected]),
        first_seen_after: None,
        first_seen_before: None,
        dead_after: None,
        dead_before: None,
        max_messages: 5,
        max_per_second: 1000,
        dry_run: false,
        operator: "ana".into(),
        note: "retention".into(),
        extend_freshness_secs: None,
        accept_duplicates: false,
    };
    let summary = redriver.run(&req, None).await.unwrap();
    assert_eq!(summary.total().moved, 1);
    let ttl = ledger_ttl(sms_key, "redriven", Status::Ready).await;
    ttls.push(("redriven", ttl, rejected.fresh_until));

    // Cancel, and expiry of a stale delivery.
    let cancelled = mem.reminder("ret-cancelled", &[Channel::Push]).await;
    let id = cancelled.reminder_id.clone();
    reminder_writes::cancel(&*mem.store, &*mem.ledger, &id, T0, retention)
        .await
        .unwrap()
        .unwrap();
    let key = message(&cancelled, Channel::Push).delivery_key;
    let ttl = ledger_ttl(key, "cancelled", Status::Cancelled).await;
    ttls.push(("cancelled", ttl, cancelled.fresh_until));
    let stale = mem.reminder("ret-stale", &[Channel::Push]).await;
    mem.enqueue(&message(&stale, Channel::Push)).await;
    mem.advance(3_601);
    mem.run(Channel::Push).await;
    let key = message(&stale, Channel::Push).delivery_key;
    ttls.push((
        "expired",
        ledger_ttl(key, "expired", Status::Expired).await,
        stale.fresh_until,
    ));
    assert!(mem
        .store
        .get(&ReminderId::parse("ret-stale").unwrap())
        .await
        .unwrap()
        .is_some());
    ttls
}

#[tokio::test]
async fn changing_retention_moves_every_ttl_the_system_writes() {
    // One below the default, one above: a writer that ignored the variable (or kept the
    // larger of two TTLs) would be caught by one of them.
    let short = ttls_with("1000000").await;
    let long = ttls_with("2300000").await;
    assert_eq!(short.len(), 8, "{short:?}");
    for ((what, ttl, fresh_until), (_, ttl_long, _)) in short.iter().zip(&long) {
        let expected = fresh_until.plus(Duration::from_secs(1_000_000));
        assert_eq!(*ttl, expected.as_epoch_seconds_ceil(), "{what}");
        assert_eq!(
            ttl_long - ttl,
            1_300_000,
            "{what} did not follow RETENTION_SECS"
        );
    }
}
