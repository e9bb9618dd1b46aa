//! Feedback Lambda: SES bounces and complaints in (the feedback queue, fed by an EventBridge
//! rule on the configuration set's events), suppressions out, and a partial batch response.
//! A body that is not SES feedback goes to the feedback DLQ at once with its `reason`. All of
//! the decisions are `reminders::feedback`; this file wires.
//!
//! The event source mapping must enable `ReportBatchItemFailures`: without it one failed
//! write makes SQS redeliver the whole batch.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use reminders::aws::FeedbackDeadLetters;
use reminders::clock::{Clock, SystemClock};
use reminders::config::ConfigError;
use reminders::feedback::FEEDBACK_DLQ_VAR;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let start = reminders::wiring::cold_start("feedback").await?;
    let store = start.adapters.reminders;
    let key = reminders::providers::secret::suppression_key(reminders::config::env, &start.sdk)?
        .ok_or(ConfigError::Missing(
            reminders::providers::secret::SUPPRESSION_KEY_SECRET_VAR,
        ))?;
    let dlq_url =
        reminders::config::env(FEEDBACK_DLQ_VAR).ok_or(ConfigError::Missing(FEEDBACK_DLQ_VAR))?;
    let dlq = FeedbackDeadLetters::new(aws_sdk_sqs::Client::new(&start.sdk), dlq_url);
    let (store, key, dlq) = (&store, &key, &dlq);
    run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let records = &event.payload.records;
        // The key is read on first use; without it nothing can be suppressed: retry all.
        let key = match key.get().await {
            Ok(k) => k,
            Err(e) => {
                tracing::error!(error = %e, "feedback: the suppression key is unavailable");
                let mut response = SqsBatchResponse::default();
                response.batch_item_failures = records
                    .iter()
                    .map(|r| reminders::feedback::failure(r.message_id.as_deref().unwrap_or("")))
                    .collect();
                return Ok::<SqsBatchResponse, Error>(response);
            }
        };
        let mut handled = reminders::feedback::handle(store, &key, records, SystemClock.now()).await;
        for (id, body, reason) in &handled.malformed {
            if let Err(e) = dlq.dead_letter(body, reason).await {
                tracing::error!(message_id = %id, error = %e, "feedback: dead-letter failed, retried");
                handled.response.batch_item_failures.push(reminders::feedback::failure(id));
            }
        }
        tracing::info!(
            records = records.len(),
            suppressed = handled.suppressed,
            ignored = handled.ignored,
            malformed = handled.malformed.len(),
            failed = handled.response.batch_item_failures.len(),
            "feedback batch"
        );
        Ok::<SqsBatchResponse, Error>(handled.response)
    }))
    .await
}
