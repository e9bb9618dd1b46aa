//! `remindctl local up`: the template's tables and queues (the SES feedback queue among them),
//! created on the emulator, the events bus with a rule into a tap queue, and the variables that point the functions (and
//! `local run`, `local events`) at them.

use reminders::aws::bootstrap::{
    create_channel_queues, create_deliveries_table, create_events_tap, create_feedback_queues,
    create_reminders_table, create_suppression_key_secret, QueueSpec,
};
use reminders::domain::Channel;

use super::require_emulator;

/// Create the template's tables and queues on the emulator, with the events bus, a tap queue
/// and a rule between them, and print the variables to export.
///
/// Example: AWS_ENDPOINT_URL=http://localhost:4566 remindctl local up
#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Prefix of every table and queue name.
    #[arg(long, default_value = "reminders-local")]
    prefix: String,
    /// Due-index shards, 1 to 64 (export the same DUE_SHARDS for `run`).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    shards: u32,
}

pub async fn run(args: UpArgs) -> Result<(), String> {
    let (prefix, shards) = (args.prefix.as_str(), args.shards);
    let endpoint = require_emulator()?;
    let sdk = reminders::aws::sdk_config().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let sqs = aws_sdk_sqs_client(&sdk);
    let (rem, del) = (
        format!("{prefix}-reminders"),
        format!("{prefix}-deliveries"),
    );
    let existing = dynamo
        .list_tables()
        .send()
        .await
        .map_err(|e| format!("listing the tables on {endpoint}: {}", one_line(&e)))?
        .table_names
        .unwrap_or_default();
    if !existing.contains(&rem) {
        create_reminders_table(&dynamo, &rem)
            .await
            .map_err(|e| format!("creating {rem}: {e}"))?;
    }
    if !existing.contains(&del) {
        create_deliveries_table(&dynamo, &del)
            .await
            .map_err(|e| format!("creating {del}: {e}"))?;
    }
    let (queues, dlqs) = create_channel_queues(&sqs, prefix, QueueSpec::default())
        .await
        .map_err(|e| format!("creating queues: {e}"))?;
    let events = aws_sdk_eventbridge::Client::new(&sdk);
    let tap = create_events_tap(&events, &sqs, prefix)
        .await
        .map_err(|e| format!("creating the events bus, tap queue and rule: {e}"))?;
    let (feedback, feedback_dlq) = create_feedback_queues(&sqs, prefix)
        .await
        .map_err(|e| format!("creating the feedback queues: {e}"))?;
    let secrets = aws_sdk_secretsmanager::Client::new(&sdk);
    let key_arn = create_suppression_key_secret(&secrets, prefix)
        .await
        .map_err(|e| format!("creating the suppression key's secret: {e}"))?;
    println!("# resources on {endpoint}; export these for `remindctl local run`:");
    println!("export REMINDERS_TABLE={rem}");
    println!("export DELIVERIES_TABLE={del}");
    println!("export DUE_SHARDS={shards}");
    for c in Channel::ALL {
        let up = c.as_str().to_uppercase();
        println!("export {up}_QUEUE_URL={}", queues.get(c));
        println!("export {up}_DLQ_URL={}", dlqs.get(c));
    }
    // `local run` publishes outcome events to the bus; its rule copies them to the tap
    // queue, which `local events` reads.
    println!("export EVENT_BUS_NAME={}", tap.bus);
    println!("export EVENTS_TAP_QUEUE_URL={}", tap.queue_url);
    println!("export SUPPRESSION_KEY_SECRET_ARN={key_arn}");
    // `local feedback` sends SES bounces and complaints there; `local run` plays it.
    println!("export {}={feedback}", super::feedback::FEEDBACK_QUEUE_VAR);
    println!(
        "export {}={feedback_dlq}",
        reminders::feedback::FEEDBACK_DLQ_VAR
    );
    // `local run`'s HTTP provider may then reach `local receive` over plain http on loopback
    // (https only otherwise).
    println!("export {}=1", reminders::providers::ALLOW_LOOPBACK_HTTP_VAR);
    // A comment, so `eval "$(remindctl local up)"` ignores it.
    println!(
        "# a provider that prints what it receives: remindctl local receive --port 8080 & \
         export EMAIL_PROVIDER=http EMAIL_HTTP_ENDPOINT=http://localhost:8080/send \
         SMS_PROVIDER=none PUSH_PROVIDER=none"
    );
    Ok(())
}

fn aws_sdk_sqs_client(sdk: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(sdk)
}

fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s = format!("{s}: {inner}");
        src = inner.source();
    }
    s.lines().next().unwrap_or_default().to_owned()
}
