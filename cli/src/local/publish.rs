//! `local run`'s outcome-event publisher: the ledger stream's event source mapping, played
//! beside the pipeline with the `events` function's handler (`reminders::events::player`),
//! until the pipeline stops — then one last pass, so what settled at the end is published.
//! Its checkpoint file (`Checkpoint::default_path`, under the temporary directory, one per
//! stream) lets a killed run resume where it stopped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reminders::aws::eventbridge::{EventBridgeBus, EVENT_BUS_VAR};
use reminders::aws::streams::DynamoStream;
use reminders::config::env;
use reminders::events::player::{play_once, Checkpoint, Pass};
use reminders::ports::LedgerStream;

/// Pause between passes while the pipeline runs.
const POLL: Duration = Duration::from_millis(500);

/// The stream and the bus, when events are to be published.
pub struct Publisher {
    stream: DynamoStream,
    bus: EventBridgeBus,
}

impl Publisher {
    /// `None` (said once, on stderr) when `EVENT_BUS_NAME` is unset or the deliveries table
    /// has no stream.
    pub async fn from_env(
        sdk: &aws_config::SdkConfig,
        deliveries_table: &str,
    ) -> Result<Option<Self>, String> {
        let Some(bus) = env(EVENT_BUS_VAR) else {
            eprintln!("{EVENT_BUS_VAR} is not set: outcome events are not published (remindctl local up prints it)");
            return Ok(None);
        };
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let streams = aws_sdk_dynamodbstreams::Client::new(sdk);
        let stream = DynamoStream::of_table(&dynamo, streams, deliveries_table)
            .await
            .map_err(|e| e.to_string())?;
        let Some(stream) = stream else {
            eprintln!("{deliveries_table} has no stream (created before events?): outcome events are not published; recreate it with remindctl local up --prefix NEW");
            return Ok(None);
        };
        let bus = EventBridgeBus::new(aws_sdk_eventbridge::Client::new(sdk), bus);
        Ok(Some(Self { stream, bus }))
    }

    /// Pass after pass until `done`, then a last one. A failed pass is said and retried.
    pub async fn play(&self, done: &AtomicBool) -> Result<Pass, String> {
        let path = Checkpoint::default_path(self.stream.id());
        let mut checkpoint = Checkpoint::load(&path)?;
        let mut total = Pass::default();
        loop {
            let last = done.load(Ordering::SeqCst);
            match play_once(&self.stream, &self.bus, &mut checkpoint).await {
                Ok(pass) => {
                    total.records += pass.records;
                    total.published += pass.published;
                    total.given_up += pass.given_up;
                    total.failed = pass.failed;
                }
                Err(e) => eprintln!("publishing outcome events: {e}; retrying"),
            }
            if last {
                return Ok(total);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// `events published 12 (stream records 40)`, and what is left for the next run.
pub fn summary_line(pass: &Pass) -> String {
    let mut line = format!(
        "events published {} (stream records {})",
        pass.published, pass.records
    );
    if pass.failed > 0 {
        line += &format!(", {} records left for the next run", pass.failed);
    }
    if pass.given_up > 0 {
        line += &format!(", {} given up (see the log)", pass.given_up);
    }
    line
}
