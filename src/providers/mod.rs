//! Real providers, chosen per channel by configuration alone (`<CHANNEL>_PROVIDER`):
//! `http` (the generic HTTP contract, any channel), `ses` (email), `sns` (SMS, push), or
//! `none` to disable a channel explicitly. Every provider classifies its own errors into the
//! design's outcome classes; SDK clients run with retries off and an operation timeout.

pub mod http;
pub mod sdk;
pub mod secret;
pub mod ses;
pub mod sns;

use std::time::Duration;

use crate::clock::Clock;
use crate::config::ConfigError;
use crate::domain::{Channel, PerChannel};
use crate::policy::Outcome;
use crate::ports::{GatePartition, Provider, SendRequest};
pub use http::{HttpConfig, HttpProvider};
pub use secret::{SecretToken, Token};
pub use ses::{SesConfig, SesProvider};
pub use sns::{SnsPushConfig, SnsPushProvider, SnsSmsConfig, SnsSmsProvider};

/// Any configured provider (static dispatch: the port trait is not object safe).
#[derive(Debug, Clone)]
pub enum AnyProvider<C> {
    Http(HttpProvider<C>),
    Ses(SesProvider<C>),
    SnsSms(SnsSmsProvider<C>),
    SnsPush(SnsPushProvider<C>),
    /// `<CHANNEL>_PROVIDER=none`: deliveries on this channel die as `rejected`, with a reason,
    /// and can be redriven once a provider is configured.
    Disabled,
}

impl<C: Clock> Provider for AnyProvider<C> {
    fn honours_idempotency_key(&self) -> bool {
        match self {
            AnyProvider::Http(p) => p.honours_idempotency_key(),
            AnyProvider::Ses(p) => p.honours_idempotency_key(),
            AnyProvider::SnsSms(p) => p.honours_idempotency_key(),
            AnyProvider::SnsPush(p) => p.honours_idempotency_key(),
            AnyProvider::Disabled => true,
        }
    }

    fn partition(&self, channel: Channel) -> GatePartition {
        match self {
            AnyProvider::Http(p) => p.partition(channel),
            AnyProvider::Ses(p) => p.partition(channel),
            AnyProvider::SnsSms(p) => p.partition(channel),
            AnyProvider::SnsPush(p) => p.partition(channel),
            AnyProvider::Disabled => GatePartition::new(channel, "disabled"),
        }
    }

    async fn send(&self, request: &SendRequest) -> Outcome {
        match self {
            AnyProvider::Http(p) => p.send(request).await,
            AnyProvider::Ses(p) => p.send(request).await,
            AnyProvider::SnsSms(p) => p.send(request).await,
            AnyProvider::SnsPush(p) => p.send(request).await,
            AnyProvider::Disabled => Outcome::Permanent {
                error: "channel_disabled".into(),
            },
        }
    }
}

/// The variables that configure one channel's provider.
struct Vars {
    provider: &'static str,
    endpoint: &'static str,
    token: &'static str,
    token_secret: &'static str,
    idempotent: &'static str,
    partition: &'static str,
    ses_from: &'static str,
    ses_configuration_set: &'static str,
    sns_sms_type: &'static str,
    sns_sender_id: &'static str,
    sns_platform_application: &'static str,
}

macro_rules! vars {
    ($p:literal) => {
        Vars {
            provider: concat!($p, "_PROVIDER"),
            endpoint: concat!($p, "_HTTP_ENDPOINT"),
            token: concat!($p, "_HTTP_TOKEN"),
            token_secret: concat!($p, "_HTTP_TOKEN_SECRET_ARN"),
            idempotent: concat!($p, "_HTTP_IDEMPOTENT"),
            partition: concat!($p, "_PARTITION"),
            ses_from: concat!($p, "_SES_FROM"),
            ses_configuration_set: concat!($p, "_SES_CONFIGURATION_SET"),
            sns_sms_type: concat!($p, "_SNS_SMS_TYPE"),
            sns_sender_id: concat!($p, "_SNS_SENDER_ID"),
            sns_platform_application: concat!($p, "_SNS_PLATFORM_APPLICATION_ARN"),
        }
    };
}

/// Every variable the providers read on Lambda (the template sets each for the consumer).
pub const VARS: [&str; 20] = [
    "PUSH_PROVIDER",
    "PUSH_PARTITION",
    "PUSH_HTTP_ENDPOINT",
    "PUSH_HTTP_TOKEN_SECRET_ARN",
    "PUSH_HTTP_IDEMPOTENT",
    "EMAIL_PROVIDER",
    "EMAIL_PARTITION",
    "EMAIL_HTTP_ENDPOINT",
    "EMAIL_HTTP_TOKEN_SECRET_ARN",
    "EMAIL_HTTP_IDEMPOTENT",
    "SMS_PROVIDER",
    "SMS_PARTITION",
    "SMS_HTTP_ENDPOINT",
    "SMS_HTTP_TOKEN_SECRET_ARN",
    "SMS_HTTP_IDEMPOTENT",
    "EMAIL_SES_FROM",
    "EMAIL_SES_CONFIGURATION_SET",
    "SMS_SNS_SMS_TYPE",
    "SMS_SNS_SENDER_ID",
    "PUSH_SNS_PLATFORM_APPLICATION_ARN",
];

/// Local-run settings, never set on Lambda: plain bearer tokens (refused on it) and the
/// permission for plain http to loopback (ignored on it).
pub const LOCAL_ONLY_VARS: [&str; 4] = [
    "PUSH_HTTP_TOKEN",
    "EMAIL_HTTP_TOKEN",
    "SMS_HTTP_TOKEN",
    ALLOW_LOOPBACK_HTTP_VAR,
];

/// Set to `1` by `remindctl local up` (and by tests) to let a provider endpoint be plain
/// `http` to this machine's loopback: the permission is asked for, never inferred from being
/// off Lambda, so a consumer on ECS or EC2 does not quietly accept `http://localhost`.
pub const ALLOW_LOOPBACK_HTTP_VAR: &str = "REMINDERS_ALLOW_LOOPBACK_HTTP";

/// Whether a provider endpoint may be plain `http` to loopback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopbackHttp {
    /// `REMINDERS_ALLOW_LOOPBACK_HTTP=1`, off Lambda.
    Allowed,
    /// Off Lambda, without the variable.
    NotAskedFor,
    /// On Lambda: never, whatever the variable says.
    OnLambda,
}

impl LoopbackHttp {
    fn from_env(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let asked = match get(ALLOW_LOOPBACK_HTTP_VAR).as_deref() {
            None | Some("") | Some("0") => false,
            Some("1") => true,
            Some(other) => {
                return Err(ConfigError::invalid(
                    ALLOW_LOOPBACK_HTTP_VAR,
                    format!("{other:?}: use 1 (or leave it unset)"),
                ))
            }
        };
        Ok(if get("AWS_LAMBDA_FUNCTION_NAME").is_some() {
            Self::OnLambda
        } else if asked {
            Self::Allowed
        } else {
            Self::NotAskedFor
        })
    }
}

fn vars(channel: Channel) -> Vars {
    match channel {
        Channel::Push => vars!("PUSH"),
        Channel::Email => vars!("EMAIL"),
        Channel::Sms => vars!("SMS"),
    }
}

/// Build each channel's provider from the environment (no network at cold start). `sdk` is
/// the shared SDK configuration; provider clients derive theirs with retries off.
pub fn from_lookup<C: Clock + Clone>(
    get: impl Fn(&str) -> Option<String>,
    clock: C,
    timeout: Duration,
    sdk: &aws_config::SdkConfig,
) -> Result<PerChannel<AnyProvider<C>>, ConfigError> {
    let provider_sdk = sdk::no_retries(sdk, timeout);
    let mut out = Vec::new();
    for channel in Channel::ALL {
        let v = vars(channel);
        let kind_var = v.provider;
        let invalid = |problem: String| ConfigError::Invalid {
            var: kind_var,
            problem,
        };
        let provider = match (get(kind_var).as_deref(), channel) {
            (None, _) => return Err(ConfigError::Missing(kind_var)),
            (Some("none"), _) => AnyProvider::Disabled,
            (Some("http"), _) => {
                let token = token_from(&get, &v, sdk)?;
                AnyProvider::Http(http_from(&get, channel, clock.clone(), timeout, token)?)
            }
            (Some("ses"), Channel::Email) => {
                AnyProvider::Ses(SesProvider::new(&provider_sdk, ses_from(&get, &v)?, clock.clone()))
            }
            (Some("sns"), Channel::Sms) => {
                let cfg = sns_sms_from(&get, &v)?;
                AnyProvider::SnsSms(SnsSmsProvider::new(&provider_sdk, cfg, clock.clone()))
            }
            (Some("sns"), Channel::Push) => {
                let cfg = sns_push_from(&get, &v);
                AnyProvider::SnsPush(SnsPushProvider::new(&provider_sdk, cfg, clock.clone()))
            }
            (Some(other), _) => {
                return Err(invalid(format!(
                    "{other:?} does not serve {channel}: use http, none, ses (email) or sns (sms, push)"
                )))
            }
        };
        out.push(provider);
    }
    let mut it = out.into_iter();
    let mut next = || it.next().unwrap_or(AnyProvider::Disabled);
    Ok(PerChannel::from_fn(|_| next()))
}

fn ses_from(get: &impl Fn(&str) -> Option<String>, v: &Vars) -> Result<SesConfig, ConfigError> {
    let from = get(v.ses_from).ok_or(ConfigError::Missing(v.ses_from))?;
    crate::domain::Recipient::parse(Channel::Email, &from)
        .map_err(|e| ConfigError::invalid(v.ses_from, e.to_string()))?;
    let domain = from.rsplit('@').next().unwrap_or("ses").to_owned();
    Ok(SesConfig {
        from,
        configuration_set: get(v.ses_configuration_set),
        partition: get(v.partition).unwrap_or(format!("ses:{domain}")),
    })
}

fn sns_sms_from(
    get: &impl Fn(&str) -> Option<String>,
    v: &Vars,
) -> Result<SnsSmsConfig, ConfigError> {
    let sms_type = get(v.sns_sms_type).unwrap_or("Transactional".into());
    if !matches!(sms_type.as_str(), "Transactional" | "Promotional") {
        return Err(ConfigError::invalid(
            v.sns_sms_type,
            "use Transactional or Promotional",
        ));
    }
    Ok(SnsSmsConfig {
        sms_type,
        sender_id: get(v.sns_sender_id),
        partition: get(v.partition).unwrap_or("sns-sms".into()),
    })
}

fn sns_push_from(get: &impl Fn(&str) -> Option<String>, v: &Vars) -> SnsPushConfig {
    let app = get(v.sns_platform_application);
    SnsPushConfig {
        partition: get(v.partition)
            .or_else(|| app.clone())
            .unwrap_or("sns-push".into()),
        platform_application_arn: app,
    }
}

/// The bearer token's source: a Secrets Manager ARN, or (off Lambda only) a plain value.
fn token_from(
    get: &impl Fn(&str) -> Option<String>,
    v: &Vars,
    sdk: &aws_config::SdkConfig,
) -> Result<Token, ConfigError> {
    let plain = get(v.token).filter(|t| !t.is_empty());
    let secret = get(v.token_secret).filter(|t| !t.is_empty());
    let on_lambda = get("AWS_LAMBDA_FUNCTION_NAME").is_some();
    match (plain, secret) {
        (Some(_), Some(_)) => Err(ConfigError::invalid(
            v.token,
            format!("set {} or {}, not both", v.token, v.token_secret),
        )),
        (Some(_), None) if on_lambda => Err(ConfigError::invalid(
            v.token,
            format!(
                "a plain token is for local runs; on Lambda give {} (Secrets Manager)",
                v.token_secret
            ),
        )),
        (Some(t), None) => Ok(Token::Plain(t)),
        (None, Some(arn)) if !arn.starts_with("arn:") => Err(ConfigError::invalid(
            v.token_secret,
            "must be a Secrets Manager secret ARN",
        )),
        (None, Some(arn)) => Ok(Token::Secret(SecretToken::new(sdk, arn))),
        (None, None) => Ok(Token::None),
    }
}

/// A provider endpoint carries the recipient, the content and the bearer token: `https`
/// only. Plain `http` to this machine's loopback never leaves the host, so a local run
/// (`remindctl local run` against `local receive`, the tests) may ask for it with
/// `REMINDERS_ALLOW_LOOPBACK_HTTP=1`; on Lambda never.
pub fn check_endpoint(endpoint: &reqwest::Url, loopback_http: LoopbackHttp) -> Result<(), String> {
    let Some(host) = endpoint.host_str().filter(|h| !h.is_empty()) else {
        return Err("must be an https URL with a host".into());
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match (endpoint.scheme(), loopback, loopback_http) {
        ("https", _, _) => Ok(()),
        ("http", true, LoopbackHttp::Allowed) => Ok(()),
        ("http", true, LoopbackHttp::OnLambda) => Err(format!(
            "must be https on Lambda (plain http to loopback is for local runs, and \
             {ALLOW_LOOPBACK_HTTP_VAR} does not change that)"
        )),
        ("http", true, LoopbackHttp::NotAskedFor) => Err(format!(
            "must be https: plain http to loopback is for local runs and needs \
             {ALLOW_LOOPBACK_HTTP_VAR}=1 (`remindctl local up` exports it)"
        )),
        ("http", false, _) => Err(format!(
            "must be https: plain http would carry the recipient, the content and the \
             token unencrypted (http is accepted only to a loopback host, off Lambda, with \
             {ALLOW_LOOPBACK_HTTP_VAR}=1)"
        )),
        _ => Err("must be an https URL with a host".into()),
    }
}

fn http_from<C: Clock>(
    get: &impl Fn(&str) -> Option<String>,
    channel: Channel,
    clock: C,
    timeout: Duration,
    token: Token,
) -> Result<HttpProvider<C>, ConfigError> {
    let v = vars(channel);
    let endpoint_var = v.endpoint;
    let raw = get(endpoint_var).ok_or(ConfigError::Missing(endpoint_var))?;
    let endpoint = reqwest::Url::parse(&raw).map_err(|e| ConfigError::Invalid {
        var: endpoint_var,
        problem: e.to_string(),
    })?;
    check_endpoint(&endpoint, LoopbackHttp::from_env(get)?).map_err(|problem| {
        ConfigError::Invalid {
            var: endpoint_var,
            problem,
        }
    })?;
    let idempotent_var = v.idempotent;
    let idempotent = match get(idempotent_var).as_deref() {
        None | Some("true") => true,
        Some("false") => false,
        Some(other) => {
            return Err(ConfigError::Invalid {
                var: idempotent_var,
                problem: format!("{other:?}: use true or false"),
            })
        }
    };
    let partition =
        get(v.partition).unwrap_or_else(|| endpoint.host_str().unwrap_or("http").to_owned());
    let cfg = HttpConfig {
        endpoint,
        token,
        timeout,
        idempotent,
        partition,
    };
    HttpProvider::new(cfg, clock).map_err(|e| ConfigError::Invalid {
        var: endpoint_var,
        problem: e.to_string(),
    })
}
