//! Gate contract: closing only extends, partitions are independent.

use reminders::aws::dynamo::DynamoGate;
use reminders::clock::Timestamp;
use reminders::domain::Channel;
use reminders::ports::{Gate, GatePartition, MemoryGate};

use crate::common;

async fn suite<G: Gate>(gate: &G) {
    let sms = GatePartition::new(Channel::Sms, "acct-1");
    let email = GatePartition::new(Channel::Email, "acct-1");
    let t = Timestamp::from_millis;
    assert_eq!(gate.throttled_until(&sms).await.unwrap(), None);
    gate.throttle(&sms, t(2_000)).await.unwrap();
    assert_eq!(gate.throttled_until(&sms).await.unwrap(), Some(t(2_000)));
    gate.throttle(&sms, t(1_000)).await.unwrap();
    assert_eq!(
        gate.throttled_until(&sms).await.unwrap(),
        Some(t(2_000)),
        "an earlier time never shortens a closing"
    );
    gate.throttle(&sms, t(3_000)).await.unwrap();
    assert_eq!(gate.throttled_until(&sms).await.unwrap(), Some(t(3_000)));
    assert_eq!(gate.throttled_until(&email).await.unwrap(), None);
}

#[tokio::test]
async fn memory_gate_meets_the_contract() {
    suite(&MemoryGate::default()).await;
}

#[tokio::test]
async fn dynamodb_gate_meets_the_contract() {
    let client = common::dynamo().await;
    let table = common::deliveries_table(&client).await;
    suite(&DynamoGate::new(client, table)).await;
}
