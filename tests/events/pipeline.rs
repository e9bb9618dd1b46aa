//! The whole local path: reminders created, one cancelled, played by the local runner with
//! the stream player beside it (as `remindctl local run` does) — one event per settled
//! delivery, carrying the keys the provider saw; the cancelled one `cancelled`, never sent;
//! the dead one with its reason; and nothing for the DLQ-copy bookkeeping on it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reminders::aws::bootstrap::QueueSpec;
use reminders::consumer::ConsumerConfig;
use reminders::domain::Channel;
use reminders::events::player::{play_once, Checkpoint, Pass};
use reminders::ports::ReminderStore;
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::local::{self, LocalConfig, Stop};
use reminders_harness::scripted::Answer;

use super::{ids, key_of, support, Events};

/// The player until `done`, then a last pass (what `local run` does).
async fn play_until(events: &Events, done: &AtomicBool) -> Pass {
    let mut checkpoint = Checkpoint::load(&events.checkpoint).unwrap();
    let mut total = Pass::default();
    loop {
        let last = done.load(Ordering::SeqCst);
        let pass = play_once(&events.stream, &events.bus, &mut checkpoint)
            .await
            .unwrap();
        total.published += pass.published;
        total.failed += pass.failed;
        if last {
            return total;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn each_settled_delivery_of_a_local_run_is_one_event_with_the_providers_key() {
    let spec = QueueSpec {
        visibility_timeout_secs: 10,
        ..QueueSpec::default()
    };
    let world = support::AwsWorld::new(spec).await;
    let events = Events::new(&world, &world.deliveries_table, "path").await;
    let retention = ConsumerConfig::default().retention;
    let reminders: Vec<_> = [
        ("path-email", Channel::Email),
        ("path-sms", Channel::Sms),
        ("path-push-rejected", Channel::Push),
        ("path-cancelled", Channel::Sms),
    ]
    .into_iter()
    .map(|(id, c)| support::reminder(id, c))
    .collect();
    for r in &reminders {
        world.ports.reminders.insert(r).await.unwrap();
    }
    let (rejected, cancelled) = (key_of(&reminders[2]), key_of(&reminders[3]));
    world.provider.script_for(&rejected, [Answer::Permanent]);
    let id = &reminders[3].reminder_id;
    reminders::reminder_writes::cancel(
        &world.ports.reminders,
        &world.ports.ledger,
        id,
        support::now(),
        retention,
    )
    .await
    .unwrap()
    .expect("cancelled");

    let consumer = world.consumer();
    let scheduler_cfg = SchedulerConfig {
        schedule_period: Duration::from_secs(1),
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::new(world.ports.clone(), scheduler_cfg);
    let cfg = LocalConfig {
        schedule_period: Duration::from_secs(1),
        visibility_secs: 10,
        poll_interval: Duration::from_millis(200),
        ..LocalConfig::default()
    };
    let done = AtomicBool::new(false);
    let pipeline = async {
        let stop = Stop::Idle {
            at_most: Duration::from_secs(90),
        };
        let interrupt = AtomicBool::new(false);
        let report = local::run(
            &scheduler,
            &consumer,
            &world.queues,
            &cfg,
            stop,
            &interrupt,
            None,
        )
        .await;
        done.store(true, Ordering::SeqCst);
        report
    };
    let (report, pass) = tokio::join!(pipeline, play_until(&events, &done));
    assert!(report.unwrap().idle);
    assert_eq!((pass.published, pass.failed), (4, 0), "{pass:?}");

    let got = events.drain(4).await;
    assert_eq!(got.len(), 4, "one event per settled delivery: {got:#?}");
    let mut distinct = ids(&got);
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "no event twice");
    for r in &reminders {
        let key = key_of(r);
        let event = got
            .iter()
            .find(|e| e["detail"]["delivery_key"] == key.as_str())
            .unwrap_or_else(|| panic!("no event for {}", r.reminder_id));
        let d = &event["detail"];
        assert_eq!(d["reminder_id"], r.reminder_id.as_str());
        let expected = if key == cancelled {
            assert_eq!(
                world.provider.calls_for(&key),
                0,
                "a cancelled one is never sent"
            );
            ("cancelled", serde_json::Value::Null)
        } else if key == rejected {
            assert_eq!(world.provider.calls_for(&key), 1, "the provider saw it");
            ("dead", "rejected".into())
        } else {
            assert_eq!(world.provider.sends_for(&key), 1, "the provider saw it");
            ("delivered", serde_json::Value::Null)
        };
        assert_eq!(
            (d["outcome"].as_str().unwrap(), d["reason"].clone()),
            expected,
            "{d}"
        );
    }
}
