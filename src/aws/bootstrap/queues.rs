//! The channel queues and the feedback queue, each with its DLQ and redrive policy, as the
//! template declares them.

use std::collections::HashMap;

use aws_sdk_sqs::types::QueueAttributeName;

use super::super::sqs::ChannelUrls;
use super::BootstrapError;
use crate::domain::Channel;

/// Queue settings shared by the template and the bootstrap.
#[derive(Debug, Clone, Copy)]
pub struct QueueSpec {
    pub visibility_timeout_secs: u32,
    pub max_receive_count: u32,
    pub retention_secs: u32,
    pub dlq_retention_secs: u32,
}

impl Default for QueueSpec {
    fn default() -> Self {
        Self {
            visibility_timeout_secs: 180,
            max_receive_count: 100,
            retention_secs: 4 * 24 * 3600,
            dlq_retention_secs: 14 * 24 * 3600,
        }
    }
}

/// `{prefix}-{channel}` queues, each with its `{prefix}-{channel}-dlq` and a redrive policy.
/// Returns (queue URLs, DLQ URLs).
pub async fn create_channel_queues(
    client: &aws_sdk_sqs::Client,
    prefix: &str,
    spec: QueueSpec,
) -> Result<(ChannelUrls, ChannelUrls), BootstrapError> {
    let mut queues = HashMap::new();
    let mut dlqs = HashMap::new();
    for channel in Channel::ALL {
        let (url, dlq_url) =
            create_queue_with_dlq(client, &format!("{prefix}-{channel}"), spec).await?;
        queues.insert(channel, url);
        dlqs.insert(channel, dlq_url);
    }
    let urls = |mut m: HashMap<Channel, String>| {
        ChannelUrls::from_fn(|c| m.remove(&c).unwrap_or_default())
    };
    Ok((urls(queues), urls(dlqs)))
}

/// A queue's ARN, from its URL.
pub(super) async fn queue_arn(
    client: &aws_sdk_sqs::Client,
    url: &str,
) -> Result<String, BootstrapError> {
    Ok(client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or("get_queue_attributes returned no QueueArn")?)
}

/// The SES feedback queue as the template declares `FeedbackQueue` and its DLQ (a template
/// test holds the two together): 60 s visibility (six times the function's timeout), five
/// receives before the DLQ, four days' retention, the DLQ's fourteen.
pub const FEEDBACK_QUEUE_SPEC: QueueSpec = QueueSpec {
    visibility_timeout_secs: 60,
    max_receive_count: 5,
    retention_secs: 4 * 24 * 3600,
    dlq_retention_secs: 14 * 24 * 3600,
};

/// `{prefix}-feedback` (the SES feedback queue, as [`FEEDBACK_QUEUE_SPEC`]) and
/// `{prefix}-feedback-dlq`. Returns (queue URL, DLQ URL). Creating what exists already is
/// harmless (`local up` may run twice).
pub async fn create_feedback_queues(
    client: &aws_sdk_sqs::Client,
    prefix: &str,
) -> Result<(String, String), BootstrapError> {
    create_queue_with_dlq(client, &format!("{prefix}-feedback"), FEEDBACK_QUEUE_SPEC).await
}

/// `name` with its DLQ `name-dlq` and a redrive policy between them, as `spec` says. Returns
/// (queue URL, DLQ URL).
async fn create_queue_with_dlq(
    client: &aws_sdk_sqs::Client,
    name: &str,
    spec: QueueSpec,
) -> Result<(String, String), BootstrapError> {
    let dlq_url = client
        .create_queue()
        .queue_name(format!("{name}-dlq"))
        .attributes(
            QueueAttributeName::MessageRetentionPeriod,
            spec.dlq_retention_secs.to_string(),
        )
        .send()
        .await?
        .queue_url
        .ok_or("create_queue returned no URL")?;
    let dlq_arn = queue_arn(client, &dlq_url).await?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": spec.max_receive_count,
    });
    let url = client
        .create_queue()
        .queue_name(name)
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            spec.visibility_timeout_secs.to_string(),
        )
        .attributes(
            QueueAttributeName::MessageRetentionPeriod,
            spec.retention_secs.to_string(),
        )
        .attributes(QueueAttributeName::RedrivePolicy, redrive.to_string())
        .send()
        .await?
        .queue_url
        .ok_or("create_queue returned no URL")?;
    Ok((url, dlq_url))
}
