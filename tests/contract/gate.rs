//! Gate contract: closing only extends, partitions are independent; the breaker's count is
//! atomic and every breaker write applies exactly when [`BreakerChange::apply`] says. On
//! DynamoDB no write lowers the item's TTL (a long throttle's closing outlives later breaker
//! writes); the memory gate has no TTL, and both still apply every write the rule allows.

use reminders::aws::dynamo::DynamoGate;
use reminders::clock::Timestamp;
use reminders::domain::Channel;
use reminders::ports::gate::{BreakerChange, GateState};
use reminders::ports::{Gate, GatePartition, MemoryGate};

use crate::common;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(1_800_000_000_000 + ms)
}

async fn throttle_suite<G: Gate>(gate: &G) {
    let sms = GatePartition::new(Channel::Sms, "acct-1");
    let email = GatePartition::new(Channel::Email, "acct-1");
    let until = |g: GateState| g.throttled_until;
    assert_eq!(gate.state(&sms).await.unwrap(), GateState::default());
    gate.throttle(&sms, t(2_000)).await.unwrap();
    assert_eq!(until(gate.state(&sms).await.unwrap()), Some(t(2_000)));
    gate.throttle(&sms, t(1_000)).await.unwrap();
    assert_eq!(
        until(gate.state(&sms).await.unwrap()),
        Some(t(2_000)),
        "an earlier time never shortens a closing"
    );
    gate.throttle(&sms, t(3_000)).await.unwrap();
    assert_eq!(until(gate.state(&sms).await.unwrap()), Some(t(3_000)));
    assert_eq!(gate.state(&email).await.unwrap(), GateState::default());
}

/// Every breaker write against the pure rule: the adapter applies it exactly when the rule
/// does, and the item then reads back as the rule's answer.
async fn breaker_suite<G: Gate>(gate: &G) {
    let p = GatePartition::new(Channel::Push, "fcm");
    let other = GatePartition::new(Channel::Push, "apns");
    gate.throttle(&p, t(500)).await.unwrap();
    let mut model = gate.state(&p).await.unwrap();
    let check = |model: &mut GateState, change: BreakerChange, applied: bool| {
        let expected = change.apply(model);
        assert_eq!(applied, expected.is_some(), "{change:?} on {model:?}");
        if let Some(next) = expected {
            *model = next;
        }
    };
    for n in 1..=3 {
        let after = gate.failed(&p, t(n.into())).await.unwrap();
        model.failures = n;
        model.run_since = Some(t(1));
        assert_eq!(
            after, model,
            "the count is atomic; the run began at the first"
        );
    }
    let steps = [
        BreakerChange::Probe {
            now: t(0),
            probe_until: t(10),
            reopens: 0,
        },
        BreakerChange::Open {
            now: t(0),
            until: t(100),
        },
        BreakerChange::Open {
            now: t(1),
            until: t(200),
        },
        BreakerChange::Probe {
            now: t(99),
            probe_until: t(150),
            reopens: 0,
        },
        BreakerChange::Probe {
            now: t(100),
            probe_until: t(150),
            reopens: 0,
        },
        BreakerChange::Probe {
            now: t(120),
            probe_until: t(170),
            reopens: 0,
        },
        BreakerChange::Reopen {
            probe_until: t(170),
            until: t(300),
        },
        BreakerChange::Reopen {
            probe_until: t(150),
            until: t(300),
        },
        BreakerChange::Probe {
            now: t(300),
            probe_until: t(350),
            reopens: 0,
        },
        BreakerChange::Probe {
            now: t(300),
            probe_until: t(350),
            reopens: 1,
        },
        BreakerChange::Release {
            probe_until: t(340),
            until: t(900),
        },
        BreakerChange::Release {
            probe_until: t(350),
            until: t(900),
        },
        BreakerChange::Probe {
            now: t(899),
            probe_until: t(950),
            reopens: 1,
        },
        BreakerChange::Probe {
            now: t(900),
            probe_until: t(950),
            reopens: 1,
        },
        BreakerChange::Close,
        BreakerChange::Close,
    ];
    for change in steps {
        let applied = gate.breaker(&p, change).await.unwrap();
        check(&mut model, change, applied);
        assert_eq!(gate.state(&p).await.unwrap(), model, "after {change:?}");
    }
    assert_eq!(
        (model.failures, model.run_since),
        (0, None),
        "a close resets the run of failures"
    );
    assert_eq!(
        model.throttled_until,
        Some(t(500)),
        "the breaker leaves the 429 gate"
    );
    let b = gate.state(&other).await.unwrap();
    assert_eq!(b, GateState::default(), "partitions are independent");
    // A reopened breaker remembers how often it reopened.
    gate.failed(&p, t(400)).await.unwrap();
    let open = BreakerChange::Open {
        now: t(400),
        until: t(410),
    };
    assert!(gate.breaker(&p, open).await.unwrap());
    let probe = BreakerChange::Probe {
        now: t(410),
        probe_until: t(420),
        reopens: 0,
    };
    assert!(gate.breaker(&p, probe).await.unwrap());
    let reopen = BreakerChange::Reopen {
        probe_until: t(420),
        until: t(500),
    };
    assert!(gate.breaker(&p, reopen).await.unwrap());
    let open = gate.state(&p).await.unwrap().breaker.unwrap();
    assert_eq!(
        (open.opened_at, open.until, open.reopens),
        (t(400), t(500), 1)
    );
    assert_eq!(open.probe_until, None);
}

/// A 429's gate far out, then the breaker's writes of an outage: each applies as the rule
/// says, and `expires` (the adapter's TTL, if it has one) never drops below what the
/// throttle asked.
async fn long_throttle_suite<G: Gate, F, Fut>(gate: &G, expires: F)
where
    F: Fn(GatePartition) -> Fut,
    Fut: std::future::Future<Output = Option<i64>>,
{
    let p = GatePartition::new(Channel::Sms, "slow-acct");
    let day = 86_400_000;
    gate.throttle(&p, t(30 * day)).await.unwrap();
    let kept = expires(p.clone()).await;
    let mut model = gate.state(&p).await.unwrap();
    for n in 1..=5 {
        let after = gate.failed(&p, t(n.into())).await.unwrap();
        model.failures = n;
        model.run_since = Some(t(1));
        assert_eq!(after, model, "counted under a long throttle");
        assert_eq!(
            expires(p.clone()).await,
            kept,
            "a failure leaves the throttle's TTL"
        );
    }
    let steps = [
        BreakerChange::Open {
            now: t(5),
            until: t(10),
        },
        BreakerChange::Probe {
            now: t(10),
            probe_until: t(20),
            reopens: 0,
        },
        BreakerChange::Reopen {
            probe_until: t(20),
            until: t(40),
        },
        BreakerChange::Probe {
            now: t(40),
            probe_until: t(50),
            reopens: 1,
        },
        BreakerChange::Release {
            probe_until: t(50),
            until: t(60),
        },
        BreakerChange::Close,
    ];
    for change in steps {
        assert!(
            gate.breaker(&p, change).await.unwrap(),
            "{change:?} applies"
        );
        model = change.apply(&model).unwrap();
        assert_eq!(gate.state(&p).await.unwrap(), model, "after {change:?}");
        assert_eq!(
            expires(p.clone()).await,
            kept,
            "{change:?} leaves the throttle's TTL"
        );
    }
    gate.throttle(&p, t(60 * day)).await.unwrap();
    if let (Some(before), Some(after)) = (kept, expires(p.clone()).await) {
        assert_eq!(
            after - before,
            30 * 86_400,
            "a longer throttle keeps it longer"
        );
    }
    // A fresh item: the first write sets a TTL, and a later one raises it.
    let q = GatePartition::new(Channel::Sms, "fresh-acct");
    gate.failed(&q, t(0)).await.unwrap();
    let first = expires(q.clone()).await;
    gate.failed(&q, t(5_000)).await.unwrap();
    if let (Some(first), Some(later)) = (first, expires(q.clone()).await) {
        assert_eq!(later - first, 5, "a later failure keeps the item longer");
    }
}

/// The DynamoDB gate item's TTL attribute, as stored.
async fn stored_ttl(client: &aws_sdk_dynamodb::Client, table: &str, p: &GatePartition) -> i64 {
    let out = client
        .get_item()
        .table_name(table)
        .key(
            "delivery_key",
            aws_sdk_dynamodb::types::AttributeValue::S(p.item_key()),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    let item = out.item.expect("the gate item exists");
    item["expires_at"].as_n().unwrap().parse().unwrap()
}

#[tokio::test]
async fn memory_gate_meets_the_contract() {
    throttle_suite(&MemoryGate::default()).await;
    breaker_suite(&MemoryGate::default()).await;
    long_throttle_suite(&MemoryGate::default(), |_| async { None }).await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn dynamodb_gate_meets_the_contract() {
    let client = common::dynamo().await;
    let table = common::deliveries_table(&client).await;
    throttle_suite(&DynamoGate::new(client.clone(), &table)).await;
    let table = common::deliveries_table(&client).await;
    breaker_suite(&DynamoGate::new(client.clone(), &table)).await;
    let table = common::deliveries_table(&client).await;
    let gate = DynamoGate::new(client.clone(), &table);
    let (client, table) = (&client, &table);
    long_throttle_suite(&gate, |p| async move {
        Some(stored_ttl(client, table, &p).await)
    })
    .await;
}
