//! Create the system's tables and queues with the attributes the template declares: for
//! emulators (moto, LocalStack), tests and `remindctl local up`. Never used on AWS, where
//! `template.yaml` owns the resources.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};

use super::dynamo::{DUE_INDEX, DUE_RECIPIENTS_INDEX, SUBSCRIBER_INDEX};

mod queues;

use queues::queue_arn;
pub use queues::{create_channel_queues, create_feedback_queues, QueueSpec, FEEDBACK_QUEUE_SPEC};

/// Attributes the due index projects besides its keys: all the scheduler reads.
pub const DUE_INDEX_PROJECTION: [&str; 6] = [
    "subscriber_id",
    "fresh_until",
    "payload_version",
    "channels",
    "status",
    "enqueued_channels",
];

/// Attributes `due-recipients-index` projects besides its keys: the due index's, and the
/// recipients (hashed by the scheduler for the consumer's one read, never sent on).
pub const DUE_RECIPIENTS_INDEX_PROJECTION: [&str; 7] = {
    let mut out = ["recipients"; 7];
    let mut i = 0;
    while i < DUE_INDEX_PROJECTION.len() {
        out[i] = DUE_INDEX_PROJECTION[i];
        i += 1;
    }
    out
};

/// Attributes the subscriber index projects besides its keys: a reminder's summary
/// (`GET /v1/subscribers/{id}/reminders`), never its recipients or content.
/// (Not `owner`: a deployed index's projection cannot change in a stack update, so a list
/// reads its page's owners from the table, `aws::dynamo::subscriber`.)
pub const SUBSCRIBER_INDEX_PROJECTION: [&str; 4] =
    ["status", "fresh_until", "payload_version", "channels"];

/// The TTL attribute of both tables (epoch seconds).
pub const TTL_ATTR: &str = "expires_at";

pub type BootstrapError = Box<dyn std::error::Error + Send + Sync>;

fn key(name: &str, kind: KeyType) -> Result<KeySchemaElement, BootstrapError> {
    Ok(KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()?)
}

fn attr(name: &str, kind: ScalarAttributeType) -> Result<AttributeDefinition, BootstrapError> {
    Ok(AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(kind)
        .build()?)
}

async fn enable_ttl(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<(), BootstrapError> {
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(TTL_ATTR)
                .build()?,
        )
        .send()
        .await?;
    Ok(())
}

fn index(
    name: &str,
    hash: &str,
    range: &str,
    projected: &[&str],
) -> Result<GlobalSecondaryIndex, BootstrapError> {
    Ok(GlobalSecondaryIndex::builder()
        .index_name(name)
        .key_schema(key(hash, KeyType::Hash)?)
        .key_schema(key(range, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::Include)
                .set_non_key_attributes(Some(projected.iter().map(|s| s.to_string()).collect()))
                .build(),
        )
        .build()?)
}

/// The reminders table with its sparse due-time indexes and its subscriber index, as the
/// template deploys it.
pub async fn create_reminders_table(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<(), BootstrapError> {
    reminders_table(client, table, true).await
}

/// The reminders table as stacks deployed before `due-recipients-index` have it (or while
/// it is backfilling): the scheduler reads `due-index` and its messages take two reads.
pub async fn create_reminders_table_without_recipients_index(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<(), BootstrapError> {
    reminders_table(client, table, false).await
}

async fn reminders_table(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    with_recipients: bool,
) -> Result<(), BootstrapError> {
    let due = index(DUE_INDEX, "due_shard", "due_at", &DUE_INDEX_PROJECTION)?;
    let due_recipients = index(
        DUE_RECIPIENTS_INDEX,
        "due_shard",
        "due_at",
        &DUE_RECIPIENTS_INDEX_PROJECTION,
    )?;
    let by_subscriber = index(
        SUBSCRIBER_INDEX,
        "subscriber_id",
        "due_at",
        &SUBSCRIBER_INDEX_PROJECTION,
    )?;
    // The series the maker finds due (sparse: active series only), whole items.
    let series = GlobalSecondaryIndex::builder()
        .index_name(crate::aws::dynamo::series::SERIES_INDEX)
        .key_schema(key("series_shard", KeyType::Hash)?)
        .key_schema(key("make_at", KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()?;
    let create = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("reminder_id", KeyType::Hash)?)
        .attribute_definitions(attr("reminder_id", ScalarAttributeType::S)?)
        .attribute_definitions(attr("due_shard", ScalarAttributeType::N)?)
        .attribute_definitions(attr("due_at", ScalarAttributeType::N)?)
        .attribute_definitions(attr("subscriber_id", ScalarAttributeType::S)?)
        .attribute_definitions(attr("series_shard", ScalarAttributeType::N)?)
        .attribute_definitions(attr("make_at", ScalarAttributeType::N)?)
        .global_secondary_indexes(due)
        .global_secondary_indexes(by_subscriber)
        .global_secondary_indexes(series);
    let create = match with_recipients {
        true => create.global_secondary_indexes(due_recipients),
        false => create,
    };
    create.send().await?;
    enable_ttl(client, table).await
}

/// The deliveries table: the ledger and the provider gate items, with the stream (new and
/// old images) the outcome events are published from.
pub async fn create_deliveries_table(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<(), BootstrapError> {
    let stream = StreamSpecification::builder()
        .stream_enabled(true)
        .stream_view_type(StreamViewType::NewAndOldImages)
        .build()?;
    client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("delivery_key", KeyType::Hash)?)
        .attribute_definitions(attr("delivery_key", ScalarAttributeType::S)?)
        .stream_specification(stream)
        .send()
        .await?;
    enable_ttl(client, table).await
}

/// The outcome events' local plumbing: the bus, a tap queue, and a rule sending every
/// settled event to the queue (names in docs/events.md, "Events locally").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsTap {
    pub bus: String,
    pub queue_url: String,
    pub rule: String,
}

/// Create `{prefix}-events` (bus), `{prefix}-events-tap` (queue) and `{prefix}-settled`
/// (rule: source `reminders`, detail-type `Reminder Delivery Settled`, target the queue).
/// Creating what exists already is harmless (`local up` may run twice).
pub async fn create_events_tap(
    events: &aws_sdk_eventbridge::Client,
    sqs: &aws_sdk_sqs::Client,
    prefix: &str,
) -> Result<EventsTap, BootstrapError> {
    let (bus, queue, rule) = (
        format!("{prefix}-events"),
        format!("{prefix}-events-tap"),
        format!("{prefix}-settled"),
    );
    let exists = events.describe_event_bus().name(&bus).send().await.is_ok();
    if !exists {
        events.create_event_bus().name(&bus).send().await?;
    }
    let queue_url = sqs
        .create_queue()
        .queue_name(&queue)
        .send()
        .await?
        .queue_url
        .ok_or("create_queue returned no URL")?;
    let queue_arn = queue_arn(sqs, &queue_url).await?;
    let pattern = serde_json::json!({
        "source": [crate::events::SOURCE],
        "detail-type": [crate::events::DETAIL_TYPE],
    });
    events
        .put_rule()
        .name(&rule)
        .event_bus_name(&bus)
        .event_pattern(pattern.to_string())
        .send()
        .await?;
    let target = aws_sdk_eventbridge::types::Target::builder()
        .id("tap")
        .arn(queue_arn)
        .build()?;
    events
        .put_targets()
        .rule(&rule)
        .event_bus_name(&bus)
        .targets(target)
        .send()
        .await?;
    Ok(EventsTap {
        bus,
        queue_url,
        rule,
    })
}

/// `{prefix}-suppression-key`: the secret keying the hashes of suppressed addresses (the
/// template's `SuppressionKeySecret`), 64 random hex characters; its ARN. An existing one is
/// kept, so the hashes already stored stay findable (`local up` may run twice).
pub async fn create_suppression_key_secret(
    client: &aws_sdk_secretsmanager::Client,
    prefix: &str,
) -> Result<String, BootstrapError> {
    let name = format!("{prefix}-suppression-key");
    if let Ok(found) = client.describe_secret().secret_id(&name).send().await {
        if let Some(arn) = found.arn {
            return Ok(arn);
        }
    }
    let value: String = (0..32)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect();
    let out = client
        .create_secret()
        .name(&name)
        .secret_string(value)
        .send()
        .await?;
    Ok(out.arn.ok_or("create_secret returned no ARN")?)
}

/// Load the shared SDK configuration: region, credentials and endpoint from the standard
/// chain (`AWS_ENDPOINT_URL` selects an emulator).
pub async fn sdk_config() -> aws_config::SdkConfig {
    install_crypto();
    let https = aws_smithy_http_client::Builder::new()
        .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
            aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(https)
        .load()
        .await
}

/// Make ring the process's TLS crypto (the HTTP provider's client uses the process default).
/// Idempotent; the first caller wins.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
