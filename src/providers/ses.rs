//! Email through Amazon SES v2 `SendEmail`. SES has no idempotency key, so the provider says
//! so and an ambiguous send dies as `ambiguous` (docs/design.md, "The ambiguous rule"); the
//! delivery key travels as a message tag for reconciliation.

use std::time::Duration;

use aws_sdk_sesv2::operation::send_email::SendEmailError;
use aws_sdk_sesv2::types::{
    Body, Content as SesContent, Destination, EmailContent, Message, MessageTag, Template,
};

use super::sdk::{classify, short};
use crate::clock::Clock;
use crate::domain::{Channel, Content, SuppressionSource};
use crate::policy::Outcome;
use crate::ports::{GatePartition, Provider, SendRequest};

/// How long a suspended account or paused sending closes the partition.
pub const BLOCK: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Clone)]
pub struct SesConfig {
    pub from: String,
    pub configuration_set: Option<String>,
    pub partition: String,
}

#[derive(Debug, Clone)]
pub struct SesProvider<C> {
    client: aws_sdk_sesv2::Client,
    cfg: SesConfig,
    clock: C,
}

impl<C: Clock> SesProvider<C> {
    /// `sdk` should come from [`super::sdk::no_retries`].
    pub fn new(sdk: &aws_config::SdkConfig, cfg: SesConfig, clock: C) -> Self {
        Self {
            client: aws_sdk_sesv2::Client::new(sdk),
            cfg,
            clock,
        }
    }

    fn content(request: &SendRequest) -> Result<EmailContent, Outcome> {
        let bad = |_| Outcome::Permanent {
            error: "ses_bad_content".into(),
        };
        Ok(match &request.content {
            Content::Text { subject, body } => {
                let subject = SesContent::builder()
                    .data(subject)
                    .charset("UTF-8")
                    .build()
                    .map_err(bad)?;
                let text = SesContent::builder()
                    .data(body)
                    .charset("UTF-8")
                    .build()
                    .map_err(bad)?;
                let message = Message::builder()
                    .subject(subject)
                    .body(Body::builder().text(text).build())
                    .build();
                EmailContent::builder().simple(message).build()
            }
            Content::Template {
                template_id,
                template_data,
            } => EmailContent::builder()
                .template(
                    Template::builder()
                        .template_name(template_id)
                        .template_data(template_data)
                        .build(),
                )
                .build(),
        })
    }
}

impl<C: Clock> Provider for SesProvider<C> {
    fn honours_idempotency_key(&self) -> bool {
        false
    }

    fn partition(&self, channel: Channel) -> GatePartition {
        GatePartition::new(channel, self.cfg.partition.clone())
    }

    async fn send(&self, request: &SendRequest) -> Outcome {
        let content = match Self::content(request) {
            Ok(c) => c,
            Err(outcome) => return outcome,
        };
        let tag = MessageTag::builder()
            .name("delivery_key")
            .value(request.delivery_key.as_str())
            .build();
        let mut call = self
            .client
            .send_email()
            .from_email_address(&self.cfg.from)
            .destination(
                Destination::builder()
                    .to_addresses(request.recipient.expose())
                    .build(),
            )
            .content(content)
            .set_configuration_set_name(self.cfg.configuration_set.clone());
        if let Ok(tag) = tag {
            call = call.email_tags(tag);
        }
        let now = self.clock.now();
        match call.send().await {
            Ok(out) => Outcome::Delivered {
                receipt: out.message_id,
            },
            Err(err) => classify("ses", &err, |e| match e {
                SendEmailError::TooManyRequestsException(_)
                | SendEmailError::LimitExceededException(_) => {
                    Some(Outcome::Throttled { retry_after: None })
                }
                SendEmailError::AccountSuspendedException(_)
                | SendEmailError::SendingPausedException(_) => Some(Outcome::Blocked {
                    error: format!("ses_{}", short(e.meta().code().unwrap_or("blocked"))),
                    retry_after: now.plus(BLOCK),
                }),
                // SES refuses a malformed recipient address with a 400 naming it ("Illegal
                // address", "Missing final '@domain'"); a sandbox's "not verified" is the
                // sender's configuration, not a dead address.
                SendEmailError::BadRequestException(_)
                    if e.meta().message().is_some_and(invalid_address) =>
                {
                    Some(Outcome::Gone {
                        error: format!("ses_{}", short(e.meta().code().unwrap_or("rejected"))),
                        source: SuppressionSource::SesInvalidAddress,
                    })
                }
                SendEmailError::MessageRejected(_)
                | SendEmailError::MailFromDomainNotVerifiedException(_)
                | SendEmailError::BadRequestException(_)
                | SendEmailError::NotFoundException(_) => Some(Outcome::Permanent {
                    error: format!("ses_{}", short(e.meta().code().unwrap_or("rejected"))),
                }),
                _ => None,
            }),
        }
    }
}

/// Whether SES's message refuses the recipient's address itself.
fn invalid_address(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    (m.contains("illegal address")
        || m.contains("missing final '@domain'")
        || m.contains("invalid address"))
        && !m.contains("not verified")
}
