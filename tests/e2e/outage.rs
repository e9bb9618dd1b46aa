//! A provider outage on the emulator, through the local runner: the HTTP provider answers 503
//! to every call for 20 s, then recovers. 60 reminders (20 per channel) fall due in the
//! outage's first seconds with ten minutes of freshness. The breaker holds them instead of
//! letting each spend its attempts: every one is delivered after the recovery, none twice, and
//! the calls the provider took during the outage are no more than the probes plus the calls
//! made before each partition opened (its threshold, and the sends already in flight then).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reminders::clock::{Clock, SystemClock};
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::{
    Channel, Content, DeliveryKey, NewReminder, Recipient, Reminder, ReminderId, SubscriberId,
};
use reminders::ledger::Status;
use reminders::policy::BreakerPolicy;
use reminders::ports::{Ledger, ReminderStore};
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::local::{self, LocalConfig, Stop};

use crate::server::{respond, serve_fn, Behaviour};

const OUTAGE: Duration = Duration::from_secs(20);
const PER_CHANNEL: u32 = 20;

#[derive(Default)]
struct Provider {
    accepted: HashMap<String, u32>,
    /// Calls answered 503, per channel (the subject names it).
    outage_calls: BTreeMap<String, u32>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn an_outage_holds_every_delivery_and_each_is_delivered_once_after_it() {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let seen = Arc::new(Mutex::new(Provider::default()));
    // The outage starts at the provider's first call, however long the setup took.
    let started = Arc::new(std::sync::OnceLock::<Instant>::new());
    let s2 = seen.clone();
    let server = serve_fn(Arc::new(move |req| {
        let started = *started.get_or_init(Instant::now);
        let key = req.header("idempotency-key").unwrap_or_default();
        let body: serde_json::Value = serde_json::from_str(&req.body).unwrap_or_default();
        let channel = body["subject"].as_str().unwrap_or_default().to_owned();
        let mut p = s2.lock().unwrap();
        if started.elapsed() < OUTAGE {
            *p.outage_calls.entry(channel).or_default() += 1;
            return respond(503, "");
        }
        *p.accepted.entry(key.clone()).or_default() += 1;
        let ok: Behaviour = respond(200, &format!(r#"{{"id":"msg-{key}"}}"#));
        ok
    }))
    .await;

    let (ports, queues) = crate::emulator_stack("outage", &server.url).await;
    // The deployed policy (fitted to the freshness) and breaker rule; cool-downs in seconds
    // to fit a test; the gate read on every record, so that the bound below is exact.
    let breaker = BreakerPolicy {
        cooldown: Duration::from_secs(1),
        cooldown_cap: Duration::from_secs(4),
        ..BreakerPolicy::default()
    };
    let consumer_cfg = ConsumerConfig {
        breaker,
        gate_cache: Duration::ZERO,
        lease: Duration::from_secs(8),
        provider_timeout: Duration::from_secs(2),
        deadline_margin: Duration::from_secs(3),
        max_receive_count: 50,
        emit_metrics: false,
        ..ConsumerConfig::default()
    };
    let max_in_flight = consumer_cfg.max_concurrency as u32;
    let consumer = Consumer::new(ports.clone(), consumer_cfg, queues.clone(), 5);
    let scheduler_cfg = SchedulerConfig {
        look_ahead: Duration::from_secs(5),
        schedule_period: Duration::from_secs(2),
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::new(ports.clone(), scheduler_cfg);

    let now = SystemClock.now();
    let mut keys = Vec::new();
    for channel in Channel::ALL {
        for i in 0..PER_CHANNEL {
            let id = format!("{}-{i}", channel.as_str());
            let recipient = match channel {
                Channel::Sms => Recipient::parse(channel, "+14155550123"),
                Channel::Email => Recipient::parse(channel, "person@example.com"),
                Channel::Push => Recipient::parse(channel, "device-token-1"),
            }
            .unwrap();
            let due = now.plus(Duration::from_millis(u64::from(i) * 150));
            let r = Reminder::new(
                NewReminder {
                    reminder_id: ReminderId::parse(&id).unwrap(),
                    subscriber_id: SubscriberId::parse(format!("sub-{i}")).unwrap(),
                    due_at: due,
                    fresh_until: Some(due.plus(Duration::from_secs(600))),
                    content: Content::Text {
                        subject: channel.as_str().into(),
                        body: "outage".into(),
                    },
                    recipients: vec![recipient],
                },
                Duration::from_secs(600),
                Duration::from_secs(3600),
            )
            .unwrap();
            ports.reminders.insert(&r).await.unwrap();
            keys.push(DeliveryKey::derive(
                &r.reminder_id,
                &r.subscriber_id,
                channel,
            ));
        }
    }

    let cfg = LocalConfig {
        schedule_period: Duration::from_secs(2),
        visibility_secs: 10,
        function_timeout: Duration::from_secs(20),
        poll_interval: Duration::from_millis(200),
        ..LocalConfig::default()
    };
    let stop = Stop::Idle {
        at_most: Duration::from_secs(240),
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    let report = local::run(&scheduler, &consumer, &queues, &cfg, stop, &never, None)
        .await
        .unwrap();
    assert!(report.idle, "the pipeline went idle: {report:?}");

    for key in &keys {
        let rec = ports.ledger.get(key).await.unwrap().expect("a ledger item");
        assert_eq!(
            rec.status(),
            Status::Delivered,
            "{key}: {:?}",
            rec.history()
        );
        assert!(
            rec.attempt_count() <= 3,
            "{key}: the outage spent its budget: {:?}",
            rec.history()
        );
    }
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.accepted.len(),
        keys.len(),
        "every delivery reached the provider"
    );
    for (key, n) in &seen.accepted {
        assert_eq!(*n, 1, "{key} accepted {n} times");
    }
    for channel in Channel::ALL {
        let m = report.metrics.get(channel);
        let calls = seen
            .outage_calls
            .get(channel.as_str())
            .copied()
            .unwrap_or(0);
        let before_open = BreakerPolicy::default().failures + max_in_flight;
        eprintln!(
            "{channel}: {calls} calls in the outage, {} probes, {} held, {} opened",
            m.breaker_probes, m.held_breaker, m.breaker_opened
        );
        assert!(m.breaker_opened >= 1, "{channel}: the breaker never opened");
        assert!(
            calls <= m.breaker_probes + before_open,
            "{channel}: {calls} calls in the outage, {} probes",
            m.breaker_probes
        );
    }
}
