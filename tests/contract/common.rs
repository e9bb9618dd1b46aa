//! Emulator plumbing shared by the suites: SDK configuration from the standard chain, unique
//! resource names, and bounded polling.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use reminders::aws::bootstrap::{
    create_channel_queues, create_deliveries_table, create_reminders_table, QueueSpec,
};
use reminders::aws::ChannelUrls;

/// The emulator's SDK config. Panics (fails the test) when no emulator is configured or it
/// does not answer: an emulator test never silently skips.
pub async fn sdk() -> aws_config::SdkConfig {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| {
        panic!("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh")
    });
    let addr = endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let reachable = tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(addr.as_str()),
    )
    .await;
    assert!(
        matches!(reachable, Ok(Ok(_))),
        "emulator at {endpoint} is not reachable"
    );
    reminders::aws::sdk_config().await
}

/// A name no other test (or earlier run against the same emulator) uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

pub async fn dynamo() -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&sdk().await)
}

pub async fn sqs() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&sdk().await)
}

pub async fn deliveries_table(client: &aws_sdk_dynamodb::Client) -> String {
    let name = unique("deliveries");
    create_deliveries_table(client, &name)
        .await
        .expect("create deliveries table");
    name
}

pub async fn reminders_table(client: &aws_sdk_dynamodb::Client) -> String {
    let name = unique("reminders");
    create_reminders_table(client, &name)
        .await
        .expect("create reminders table");
    name
}

pub async fn channel_queues(
    client: &aws_sdk_sqs::Client,
    spec: QueueSpec,
) -> (ChannelUrls, ChannelUrls) {
    create_channel_queues(client, &unique("q"), spec)
        .await
        .expect("create queues")
}

/// An item as stored, read strongly consistent: `key` names the table's key attribute.
pub async fn stored_item(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    key: (&str, &str),
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    let value = aws_sdk_dynamodb::types::AttributeValue::S(key.1.to_owned());
    client
        .get_item()
        .table_name(table)
        .key(key.0, value)
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("the item is stored")
}
