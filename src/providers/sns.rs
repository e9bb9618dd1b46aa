//! SMS through SNS `Publish` to a phone number, and mobile push through SNS platform
//! endpoints. SNS has no idempotency key: an ambiguous send dies as `ambiguous`.

use aws_sdk_sns::operation::create_platform_endpoint::CreatePlatformEndpointError;
use aws_sdk_sns::operation::publish::PublishError;
use aws_sdk_sns::types::MessageAttributeValue;

use super::sdk::{classify, short};
use super::ses::BLOCK;
use crate::clock::{Clock, Timestamp};
use crate::domain::{Channel, Content, SuppressionSource};
use crate::policy::Outcome;
use crate::ports::{GatePartition, Provider, SendRequest};

/// The text of an SMS or push: SNS carries no subject, and templates are the HTTP or email
/// providers' business.
fn text(request: &SendRequest) -> Result<String, Outcome> {
    match &request.content {
        Content::Text { subject, body } if subject.is_empty() => Ok(body.clone()),
        Content::Text { subject, body } => Ok(format!("{subject}: {body}")),
        Content::Template { .. } => Err(Outcome::Permanent {
            error: "sns_template_unsupported".into(),
        }),
    }
}

fn publish_outcome(e: &PublishError, now: Timestamp) -> Option<Outcome> {
    let code = || short(e.meta().code().unwrap_or("error"));
    match e {
        PublishError::KmsThrottlingException(_) => Some(Outcome::Throttled { retry_after: None }),
        PublishError::InternalErrorException(_) => Some(Outcome::Transient {
            error: "sns_internal_error".into(),
        }),
        // The push endpoint is dead (the platform unregistered the token): suppressed.
        PublishError::EndpointDisabledException(_) => Some(Outcome::Gone {
            error: format!("sns_{}", code()),
            source: SuppressionSource::SnsEndpointDisabled,
        }),
        // SNS names the parameter at fault: a refused phone number is a dead address.
        PublishError::InvalidParameterException(_)
        | PublishError::InvalidParameterValueException(_)
            if e.meta().message().is_some_and(names_the_number) =>
        {
            Some(Outcome::Gone {
                error: format!("sns_{}", code()),
                source: SuppressionSource::SnsInvalidNumber,
            })
        }
        PublishError::InvalidParameterException(_)
        | PublishError::InvalidParameterValueException(_)
        | PublishError::NotFoundException(_)
        | PublishError::ValidationException(_)
        // Auth rejected is permanent (docs/design.md, "Outcome classes"): a configuration fix, then
        // a redrive.
        | PublishError::AuthorizationErrorException(_) => Some(Outcome::Permanent {
            error: format!("sns_{}", code()),
        }),
        // Account- or application-wide outages: nothing this delivery did.
        PublishError::PlatformApplicationDisabledException(_)
        | PublishError::InvalidSecurityException(_)
        | PublishError::KmsAccessDeniedException(_)
        | PublishError::KmsDisabledException(_)
        | PublishError::KmsInvalidStateException(_)
        | PublishError::KmsNotFoundException(_)
        | PublishError::KmsOptInRequired(_) => Some(Outcome::Blocked {
            error: format!("sns_{}", code()),
            retry_after: now.plus(BLOCK),
        }),
        _ => None,
    }
}

#[derive(Debug, Clone)]
pub struct SnsSmsConfig {
    /// `Transactional` or `Promotional`.
    pub sms_type: String,
    pub sender_id: Option<String>,
    pub partition: String,
}

#[derive(Debug, Clone)]
pub struct SnsSmsProvider<C> {
    client: aws_sdk_sns::Client,
    cfg: SnsSmsConfig,
    clock: C,
}

impl<C: Clock> SnsSmsProvider<C> {
    pub fn new(sdk: &aws_config::SdkConfig, cfg: SnsSmsConfig, clock: C) -> Self {
        Self {
            client: aws_sdk_sns::Client::new(sdk),
            cfg,
            clock,
        }
    }
}

fn string_attr(v: &str) -> Option<MessageAttributeValue> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(v)
        .build()
        .ok()
}

impl<C: Clock> Provider for SnsSmsProvider<C> {
    fn honours_idempotency_key(&self) -> bool {
        false
    }

    fn partition(&self, channel: Channel) -> GatePartition {
        GatePartition::new(channel, self.cfg.partition.clone())
    }

    async fn send(&self, request: &SendRequest) -> Outcome {
        let message = match text(request) {
            Ok(m) => m,
            Err(outcome) => return outcome,
        };
        let mut call = self
            .client
            .publish()
            .phone_number(request.recipient.expose())
            .message(message)
            .set_message_attributes(None);
        if let Some(a) = string_attr(&self.cfg.sms_type) {
            call = call.message_attributes("AWS.SNS.SMS.SMSType", a);
        }
        if let Some(a) = self.cfg.sender_id.as_deref().and_then(string_attr) {
            call = call.message_attributes("AWS.SNS.SMS.SenderID", a);
        }
        let now = self.clock.now();
        match call.send().await {
            Ok(out) => Outcome::Delivered {
                receipt: out.message_id,
            },
            Err(err) => classify("sns", &err, |e| publish_outcome(e, now)),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SnsPushConfig {
    /// Turns a device token into an endpoint; without it, recipients must be endpoint ARNs.
    pub platform_application_arn: Option<String>,
    pub partition: String,
}

#[derive(Debug, Clone)]
pub struct SnsPushProvider<C> {
    client: aws_sdk_sns::Client,
    cfg: SnsPushConfig,
    clock: C,
}

impl<C: Clock> SnsPushProvider<C> {
    pub fn new(sdk: &aws_config::SdkConfig, cfg: SnsPushConfig, clock: C) -> Self {
        Self {
            client: aws_sdk_sns::Client::new(sdk),
            cfg,
            clock,
        }
    }

    /// The endpoint ARN to publish to: the recipient itself when it is one, else the
    /// (idempotent) endpoint SNS keeps for this token. Nothing is sent before this succeeds.
    async fn endpoint(&self, token: &str) -> Result<String, Outcome> {
        if token.starts_with("arn:") {
            return Ok(token.to_owned());
        }
        let Some(app) = &self.cfg.platform_application_arn else {
            return Err(Outcome::Permanent {
                error: "sns_no_platform_application".into(),
            });
        };
        let created = self
            .client
            .create_platform_endpoint()
            .platform_application_arn(app)
            .token(token)
            .send()
            .await;
        match created {
            Ok(out) => out.endpoint_arn.ok_or(Outcome::Transient {
                error: "sns_no_endpoint_arn".into(),
            }),
            Err(err) => {
                // Nothing was published yet, so no failure here is ambiguous.
                let outcome = classify("sns", &err, |e| match e {
                    CreatePlatformEndpointError::InvalidParameterException(_) => {
                        Some(Outcome::Permanent {
                            error: "sns_invalid_token".into(),
                        })
                    }
                    CreatePlatformEndpointError::AuthorizationErrorException(_)
                    | CreatePlatformEndpointError::NotFoundException(_) => {
                        Some(Outcome::Permanent {
                            error: "sns_platform_application_unavailable".into(),
                        })
                    }
                    _ => None,
                });
                Err(match outcome {
                    Outcome::Ambiguous { error } => Outcome::Transient { error },
                    other => other,
                })
            }
        }
    }
}

impl<C: Clock> Provider for SnsPushProvider<C> {
    fn honours_idempotency_key(&self) -> bool {
        false
    }

    fn partition(&self, channel: Channel) -> GatePartition {
        GatePartition::new(channel, self.cfg.partition.clone())
    }

    async fn send(&self, request: &SendRequest) -> Outcome {
        let message = match text(request) {
            Ok(m) => m,
            Err(outcome) => return outcome,
        };
        let now = self.clock.now();
        let target = match self.endpoint(request.recipient.expose()).await {
            Ok(arn) => arn,
            Err(outcome) => return outcome,
        };
        match self
            .client
            .publish()
            .target_arn(target)
            .message(message)
            .send()
            .await
        {
            Ok(out) => Outcome::Delivered {
                receipt: out.message_id,
            },
            Err(err) => classify("sns", &err, |e| publish_outcome(e, now)),
        }
    }
}

/// Whether SNS's message refuses the phone number itself ("Invalid parameter: PhoneNumber
/// Reason: … is not valid to publish to"; "Phone number does not meet the E164 format").
fn names_the_number(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("phonenumber") || m.contains("phone number")
}
