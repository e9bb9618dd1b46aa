//! Gate contract: closing only extends, partitions are independent; the breaker's count is
//! atomic and every breaker write applies exactly when [`BreakerChange::apply`] says.

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
        },
        BreakerChange::Probe {
            now: t(100),
            probe_until: t(150),
        },
        BreakerChange::Probe {
            now: t(120),
            probe_until: t(170),
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

#[tokio::test]
async fn memory_gate_meets_the_contract() {
    throttle_suite(&MemoryGate::default()).await;
    breaker_suite(&MemoryGate::default()).await;
}

#[tokio::test]
async fn dynamodb_gate_meets_the_contract() {
    let client = common::dynamo().await;
    let table = common::deliveries_table(&client).await;
    throttle_suite(&DynamoGate::new(client.clone(), &table)).await;
    let table = common::deliveries_table(&client).await;
    breaker_suite(&DynamoGate::new(client, table)).await;
}
