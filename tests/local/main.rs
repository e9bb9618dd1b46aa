//! `local run` as a stand-in for the deployed wiring, on in-memory ports and tokio's paused
//! clock: each channel's mapping runs on its own, so a slow provider on one channel leaves the
//! others on time; a transient receive failure is retried, not fatal; an idle run ends on its own
//! when the next reminder is an hour away, and says when.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use reminders::clock::{Clock, Timestamp};
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::{
    Channel, Content, NewReminder, PerChannel, Recipient, Reminder, ReminderId, SubscriberId,
};
use reminders::policy::Outcome;
use reminders::ports::Ports as _;
use reminders::ports::{
    DeliveryQueue, FaultPoint, GatePartition, MemoryGate, MemoryLedger, MemoryQueue,
    MemoryReminderStore, PortSet, Provider, ReminderStore, SendRequest,
};
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::around::{Around, Faults};
use reminders_harness::chaos::VirtualClock;
use reminders_harness::local::{run, LocalConfig, Stop};
use reminders_harness::stack::MemoryStack;
use reminders_harness::ScriptedProvider;

const EPOCH: Timestamp = Timestamp::from_millis(1_800_000_000_000);

/// A provider that takes `delay` of (virtual) time to answer.
struct Slow {
    inner: ScriptedProvider<VirtualClock>,
    delay: Duration,
}

impl Provider for Slow {
    fn honours_idempotency_key(&self) -> bool {
        true
    }
    fn partition(&self, channel: Channel) -> GatePartition {
        self.inner.partition(channel)
    }
    async fn send(&self, request: &SendRequest) -> Outcome {
        tokio::time::sleep(self.delay).await;
        self.inner.send(request).await
    }
}

type Ports = PortSet<
    VirtualClock,
    Arc<MemoryReminderStore>,
    Arc<MemoryLedger>,
    Arc<MemoryGate>,
    Around<Arc<MemoryQueue<VirtualClock>>, Faults>,
    Arc<MemoryQueue<VirtualClock>>,
    Arc<Slow>,
>;

struct World {
    clock: VirtualClock,
    store: Arc<MemoryReminderStore>,
    scheduler: Scheduler<Ports>,
    consumer: Consumer<Ports>,
    urls: PerChannel<String>,
}

fn world(slow: Option<Channel>, queue_faults: Faults) -> World {
    let stack = MemoryStack::on(VirtualClock::start(EPOCH));
    let MemoryStack { clock, store, .. } = stack.clone();
    let ports = stack
        .ports_with(PerChannel::from_fn(|c| {
            Arc::new(Slow {
                inner: ScriptedProvider::new(clock, true),
                delay: if Some(c) == slow {
                    Duration::from_secs(8)
                } else {
                    Duration::ZERO
                },
            })
        }))
        .map_queue(|q| Around::new(q, queue_faults));
    let urls = PerChannel::from_fn(|c| format!("http://local/000000000000/q-{c}"));
    let consumer = Consumer::new(
        ports.clone(),
        ConsumerConfig {
            emit_metrics: false,
            provider_timeout: Duration::from_secs(20),
            ..ConsumerConfig::default()
        },
        urls.clone(),
        7,
    );
    let scheduler = Scheduler::new(ports, SchedulerConfig::default());
    World {
        clock,
        store,
        scheduler,
        consumer,
        urls,
    }
}

async fn remind(w: &World, id: &str, channel: Channel, due_at: Timestamp) {
    let recipient = match channel {
        Channel::Push => "device-1",
        Channel::Email => "person@example.com",
        Channel::Sms => "+14155550123",
    };
    let r = Reminder::new(
        NewReminder {
            reminder_id: ReminderId::parse(id).unwrap(),
            subscriber_id: SubscriberId::parse(format!("s-{id}")).unwrap(),
            due_at,
            fresh_until: None,
            content: Content::Text {
                subject: "s".into(),
                body: "b".into(),
            },
            recipients: vec![Recipient::parse(channel, recipient).unwrap()],
        },
        Duration::from_secs(3600),
        Duration::from_secs(86_400),
    )
    .unwrap();
    w.store.insert(&r).await.unwrap();
}

fn cfg() -> LocalConfig {
    LocalConfig {
        schedule_period: Duration::from_secs(60),
        ..LocalConfig::default()
    }
}

/// Run until idle (at most `at_most` of virtual time), never interrupted.
async fn run_idle(
    w: &World,
    at_most: Duration,
) -> Result<reminders_harness::local::LocalReport, reminders::ports::PortError> {
    let never = AtomicBool::new(false);
    run(
        &w.scheduler,
        &w.consumer,
        &w.urls,
        &cfg(),
        Stop::Idle { at_most },
        &never,
        None,
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn a_slow_sms_provider_leaves_push_and_email_on_time() {
    let w = world(Some(Channel::Sms), Faults::default());
    for i in 0..8u64 {
        let due = EPOCH.plus(Duration::from_secs(20 + i * 3));
        remind(&w, &format!("p{i}"), Channel::Push, due).await;
        remind(&w, &format!("e{i}"), Channel::Email, due).await;
        remind(&w, &format!("s{i}"), Channel::Sms, due).await;
    }
    let report = run_idle(&w, Duration::from_secs(3600)).await.unwrap();
    for c in Channel::ALL {
        assert_eq!(report.metrics.get(c).delivered, 8, "{c}: {report:?}");
    }
    for c in [Channel::Push, Channel::Email] {
        let late = report.metrics.get(c).lateness_ms.clone();
        assert!(
            late.iter().all(|ms| *ms <= 1_000),
            "{c} waited on the slow SMS provider: lateness {late:?} ms"
        );
    }
    // The slow channel itself was late: the test would not notice a shared loop otherwise.
    let sms = report.metrics.get(Channel::Sms).lateness_ms.clone();
    assert!(sms.iter().any(|ms| *ms > 8_000), "{sms:?}");
}

#[tokio::test(start_paused = true)]
async fn a_transient_receive_failure_is_retried_and_the_run_carries_on() {
    let faults = Faults::default();
    faults.fail(reminders::ports::queue::OP_RECEIVE, FaultPoint::Before, 3);
    let w = world(None, faults);
    for i in 0..5u64 {
        remind(
            &w,
            &format!("p{i}"),
            Channel::Push,
            EPOCH.plus(Duration::from_secs(5 + i)),
        )
        .await;
    }
    let report = run_idle(&w, Duration::from_secs(3600))
        .await
        .expect("a transient failure does not end the run");
    assert_eq!(report.retried_errors, 3, "{report:?}");
    assert_eq!(report.metrics.get(Channel::Push).delivered, 5);
    assert!(report.idle);
}

#[tokio::test(start_paused = true)]
async fn an_idle_run_ends_on_its_own_with_the_next_reminder_an_hour_away() {
    let w = world(None, Faults::default());
    let in_an_hour = EPOCH.plus(Duration::from_secs(3600));
    remind(&w, "later", Channel::Email, in_an_hour).await;
    let report = run_idle(&w, Duration::from_secs(24 * 3600)).await.unwrap();
    assert!(report.idle, "{report:?}");
    assert_eq!(report.next_due, Some(in_an_hour));
    let took = w.clock.now().since(EPOCH);
    assert!(
        took < Duration::from_secs(60),
        "waited {took:?} for nothing"
    );
}

/// The live progress line's source: called as the run goes, with the report so far and each
/// queue's depth.
#[tokio::test(start_paused = true)]
async fn progress_is_reported_as_the_run_goes() {
    let w = world(None, Faults::default());
    for i in 0..4u64 {
        remind(
            &w,
            &format!("p{i}"),
            Channel::Push,
            EPOCH.plus(Duration::from_secs(30 + i)),
        )
        .await;
    }
    let seen = std::sync::Mutex::new(Vec::new());
    let on_progress = |p: &reminders_harness::local::Progress| {
        let depth = p.depths.get(Channel::Push).map(|d| d.total());
        seen.lock()
            .unwrap()
            .push((p.report.metrics.get(Channel::Push).delivered, depth));
    };
    let never = AtomicBool::new(false);
    reminders_harness::local::run(
        &w.scheduler,
        &w.consumer,
        &w.urls,
        &cfg(),
        Stop::Idle {
            at_most: Duration::from_secs(3600),
        },
        &never,
        Some(&on_progress),
    )
    .await
    .unwrap();
    let seen = seen.into_inner().unwrap();
    assert!(seen.len() > 10, "{seen:?}");
    assert!(
        seen.iter().any(|(_, depth)| *depth == Some(4)),
        "the backlog was shown: {seen:?}"
    );
    assert_eq!(seen.last().unwrap().0, 4, "{seen:?}");
}

/// The messages already in flight when an idle run starts, as an earlier run leaves one it
/// held: the run waits one idle horizon for them, so a backoff shorter than that comes back and
/// is delivered; one held longer (quiet hours) does not keep it waiting, and its summary names
/// it, without a time (SQS does not tell a client when it comes back).
#[tokio::test(start_paused = true)]
async fn an_idle_run_waits_one_horizon_for_messages_held_before_it_started() {
    for (held_secs, delivered) in [(20u32, 1u32), (3 * 3600, 0)] {
        let w = world(None, Faults::default());
        remind(&w, "held", Channel::Email, EPOCH).await;
        w.scheduler.run(None).await.unwrap();
        // An earlier run took the message and held it.
        let queue = w.consumer.ports().queue();
        let taken = queue.receive(Channel::Email, 1, held_secs).await.unwrap();
        assert_eq!(taken.len(), 1);
        let report = run_idle(&w, Duration::from_secs(24 * 3600)).await.unwrap();
        assert!(report.idle, "{report:?}");
        assert_eq!(
            report.metrics.get(Channel::Email).delivered,
            delivered,
            "held {held_secs} s: {report:?}"
        );
        let took = w.clock.now().since(EPOCH);
        assert!(took < Duration::from_secs(300), "waited {took:?}");
        let expected = match delivered {
            1 => vec![],
            _ => vec![reminders_harness::local::Held {
                channel: Channel::Email,
                messages: 1,
                first_back: None,
            }],
        };
        assert_eq!(report.held, expected, "{report:?}");
    }
}
