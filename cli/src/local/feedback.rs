//! SES feedback on a laptop. `remindctl local feedback --bounce ADDR` (or `--complaint ADDR`)
//! puts on the feedback queue what the template's rule puts there when SES reports a permanent
//! bounce or a complaint: the EventBridge event whose `detail` is the SES event. `local run`
//! plays the queue's event source mapping with the `feedback` function's handler
//! (`reminders::feedback::handle`), so the address is suppressed under the same key the
//! consumer reads, and the next reminder to it ends `suppressed` without a send.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsMessage;
use reminders::aws::FeedbackDeadLetters;
use reminders::clock::{Clock, SystemClock};
use reminders::config::env;
use reminders::domain::{Channel, Recipient, SuppressionKey};
use reminders::feedback::FEEDBACK_DLQ_VAR;
use reminders::ports::ReminderStore;

use super::require_emulator;

/// `local up` exports it: the queue the SES feedback rule feeds (on AWS, the template's
/// `FeedbackQueue`, read by the feedback function's event source mapping).
pub const FEEDBACK_QUEUE_VAR: &str = "FEEDBACK_QUEUE_URL";

/// Put an SES bounce or complaint on the feedback queue, as SES and the template's rule would
/// after a mailbox disappeared or a recipient pressed "spam"; `local run` then suppresses the
/// address.
///
/// Example: remindctl local feedback --bounce you@example.org
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("kind").required(true).args(["bounce", "complaint"])))]
pub struct FeedbackArgs {
    /// A permanent bounce of this address (the mailbox does not exist).
    #[arg(long, value_name = "ADDRESS")]
    bounce: Option<String>,
    /// A complaint from this address (its recipient marked the mail as spam).
    #[arg(long, value_name = "ADDRESS")]
    complaint: Option<String>,
}

pub async fn run(args: FeedbackArgs) -> Result<(), String> {
    require_emulator()?;
    let url = env(FEEDBACK_QUEUE_VAR).ok_or_else(|| {
        format!(
            "{FEEDBACK_QUEUE_VAR} is not set: run `eval \"$(remindctl local up)\"` in this shell first"
        )
    })?;
    let (kind, address) = match (&args.bounce, &args.complaint) {
        (Some(a), _) => ("bounce", a.as_str()),
        (None, Some(a)) => ("complaint", a.as_str()),
        (None, None) => unreachable!("clap requires one of --bounce and --complaint"),
    };
    let recipient = Recipient::parse(Channel::Email, address)
        .map_err(|e| format!("--{kind}: {e} (an email address, as user@example.org)"))?;
    let body = ses_event(kind, address, SystemClock.now().to_rfc3339());
    let sdk = reminders::aws::sdk_config().await;
    aws_sdk_sqs::Client::new(&sdk)
        .send_message()
        .queue_url(&url)
        .message_body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("sending to the feedback queue: {e}"))?;
    let what = match kind {
        "bounce" => "a permanent bounce",
        _ => "a complaint",
    };
    println!(
        "{what} of {} is on the feedback queue; `remindctl local run` suppresses the address, \
         and `remindctl suppression list` shows it",
        recipient.masked()
    );
    Ok(())
}

/// The EventBridge event the template's rule delivers for an SES bounce or complaint.
fn ses_event(kind: &str, address: &str, at: String) -> serde_json::Value {
    let mail = serde_json::json!({
        "timestamp": at,
        "source": "reminders@example.org",
        "destination": [address],
        "tags": {"ses:configuration-set": ["reminders-local"]},
    });
    let detail = match kind {
        "bounce" => serde_json::json!({
            "eventType": "Bounce",
            "mail": mail,
            "bounce": {
                "bounceType": "Permanent",
                "bounceSubType": "General",
                "bouncedRecipients": [{"emailAddress": address, "action": "failed", "status": "5.1.1"}],
                "timestamp": at,
            },
        }),
        _ => serde_json::json!({
            "eventType": "Complaint",
            "mail": mail,
            "complaint": {
                "complainedRecipients": [{"emailAddress": address}],
                "complaintFeedbackType": "abuse",
                "timestamp": at,
            },
        }),
    };
    serde_json::json!({
        "version": "0",
        "source": "aws.ses",
        "detail-type": if kind == "bounce" { "Email Bounced" } else { "Email Complaint Received" },
        "time": at,
        "detail": detail,
    })
}

/// What `local run`'s feedback player did.
#[derive(Debug, Default, Clone, Copy)]
pub struct FeedbackPass {
    pub suppressed: usize,
    pub ignored: usize,
    pub dead_lettered: usize,
}

/// The feedback queue's event source mapping, played with the feedback function's handler.
pub struct FeedbackPlayer<S> {
    sqs: aws_sdk_sqs::Client,
    url: String,
    dlq: FeedbackDeadLetters,
    store: S,
    key: SuppressionKey,
}

/// Pause between empty polls while the pipeline runs.
const POLL: Duration = Duration::from_millis(500);

impl<S: ReminderStore> FeedbackPlayer<S> {
    /// `None` when `local up` made no feedback queue (the variables are unset).
    pub fn from_env(sdk: &aws_config::SdkConfig, store: S, key: SuppressionKey) -> Option<Self> {
        let (url, dlq) = (env(FEEDBACK_QUEUE_VAR)?, env(FEEDBACK_DLQ_VAR)?);
        let sqs = aws_sdk_sqs::Client::new(sdk);
        Some(Self {
            dlq: FeedbackDeadLetters::new(sqs.clone(), dlq),
            sqs,
            url,
            store,
            key,
        })
    }

    /// Batch after batch until `done`, then until the queue has nothing visible, so feedback
    /// sent before the run is handled however soon the pipeline went idle.
    pub async fn play(&self, done: &AtomicBool) -> Result<FeedbackPass, String> {
        let mut total = FeedbackPass::default();
        loop {
            let last = done.load(Ordering::SeqCst);
            let got = self.once(&mut total).await.unwrap_or_else(|e| {
                eprintln!("{e}; tried again while the run lasts");
                0
            });
            if got == 0 {
                if last {
                    return Ok(total);
                }
                tokio::time::sleep(POLL).await;
            }
        }
    }

    /// One batch: receive, handle, dead-letter what is not feedback, delete what succeeded.
    async fn once(&self, total: &mut FeedbackPass) -> Result<usize, String> {
        let got = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(10)
            .visibility_timeout(60)
            .send()
            .await
            .map_err(|e| format!("reading the feedback queue: {e}"))?
            .messages
            .unwrap_or_default();
        let records: Vec<SqsMessage> = got
            .iter()
            .map(|m| {
                let mut r = SqsMessage::default();
                r.message_id.clone_from(&m.message_id);
                r.receipt_handle.clone_from(&m.receipt_handle);
                r.body.clone_from(&m.body);
                r
            })
            .collect();
        let handled =
            reminders::feedback::handle(&self.store, &self.key, &records, SystemClock.now()).await;
        let mut failed: Vec<&str> = handled
            .response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        for (id, body, reason) in &handled.malformed {
            match self.dlq.dead_letter(body, reason).await {
                Ok(()) => total.dead_lettered += 1,
                Err(e) => {
                    eprintln!("feedback: dead-lettering a malformed body failed ({e}); retried");
                    failed.push(id);
                }
            }
        }
        total.suppressed += handled.suppressed;
        total.ignored += handled.ignored;
        for r in &records {
            let id = r.message_id.as_deref().unwrap_or_default();
            if failed.contains(&id) {
                continue;
            }
            self.sqs
                .delete_message()
                .queue_url(&self.url)
                .receipt_handle(r.receipt_handle.as_deref().unwrap_or_default())
                .send()
                .await
                .map_err(|e| format!("deleting a feedback message: {e}"))?;
        }
        Ok(records.len())
    }
}

/// `feedback: 1 address suppressed · 0 ignored · 0 not SES feedback (dead-lettered)`
pub fn summary_line(pass: &FeedbackPass) -> String {
    format!(
        "feedback: {} address{} suppressed · {} ignored · {} not SES feedback (dead-lettered)",
        pass.suppressed,
        if pass.suppressed == 1 { "" } else { "es" },
        pass.ignored,
        pass.dead_lettered
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use reminders::domain::SuppressionSource;
    use reminders::feedback::{parse, Feedback};

    /// What `local feedback` sends is what the feedback function reads from the rule: a
    /// permanent bounce and a complaint each suppress the address given.
    #[test]
    fn the_event_sent_is_read_as_the_rule_would_deliver_it() {
        for (kind, source) in [
            ("bounce", SuppressionSource::SesBounce),
            ("complaint", SuppressionSource::SesComplaint),
        ] {
            let body = ses_event(kind, "you@example.org", "2026-12-07T00:00:00Z".into());
            assert_eq!(
                parse(&body.to_string()),
                Ok(Feedback::Suppress {
                    source,
                    addresses: vec![Recipient::parse(Channel::Email, "you@example.org").unwrap()],
                }),
                "{body}"
            );
        }
    }
}
