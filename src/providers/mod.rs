//! Real providers, chosen per channel by configuration alone (`<CHANNEL>_PROVIDER`):
//! `http` (the generic HTTP contract) today; `none` disables a channel explicitly.
//! Every provider classifies its own errors into the design's outcome classes.

pub mod http;

use std::time::Duration;

use crate::aws::ConfigError;
use crate::clock::Clock;
use crate::domain::{Channel, PerChannel};
use crate::policy::Outcome;
use crate::ports::{GatePartition, Provider, SendRequest};
pub use http::{HttpConfig, HttpProvider};

/// Any configured provider (static dispatch: the port trait is not object safe).
#[derive(Debug, Clone)]
pub enum AnyProvider<C> {
    Http(HttpProvider<C>),
    /// `<CHANNEL>_PROVIDER=none`: deliveries on this channel die as `rejected`, with a reason,
    /// and can be redriven once a provider is configured.
    Disabled,
}

impl<C: Clock> Provider for AnyProvider<C> {
    fn honours_idempotency_key(&self) -> bool {
        match self {
            AnyProvider::Http(p) => p.honours_idempotency_key(),
            AnyProvider::Disabled => true,
        }
    }

    fn partition(&self, request: &SendRequest) -> GatePartition {
        match self {
            AnyProvider::Http(p) => p.partition(request),
            AnyProvider::Disabled => GatePartition::new(request.recipient.channel(), "disabled"),
        }
    }

    async fn send(&self, request: &SendRequest) -> Outcome {
        match self {
            AnyProvider::Http(p) => p.send(request).await,
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
    idempotent: &'static str,
    partition: &'static str,
}

macro_rules! vars {
    ($p:literal) => {
        Vars {
            provider: concat!($p, "_PROVIDER"),
            endpoint: concat!($p, "_HTTP_ENDPOINT"),
            token: concat!($p, "_HTTP_TOKEN"),
            idempotent: concat!($p, "_HTTP_IDEMPOTENT"),
            partition: concat!($p, "_HTTP_PARTITION"),
        }
    };
}

fn vars(channel: Channel) -> Vars {
    match channel {
        Channel::Push => vars!("PUSH"),
        Channel::Email => vars!("EMAIL"),
        Channel::Sms => vars!("SMS"),
    }
}

/// Build each channel's provider from the environment (no network at cold start).
pub fn from_lookup<C: Clock + Clone>(
    get: impl Fn(&str) -> Option<String>,
    clock: C,
    timeout: Duration,
) -> Result<PerChannel<AnyProvider<C>>, ConfigError> {
    let mut out = Vec::new();
    for channel in Channel::ALL {
        let kind_var = vars(channel).provider;
        let provider = match get(kind_var).as_deref() {
            None => return Err(ConfigError::Missing(kind_var)),
            Some("none") => AnyProvider::Disabled,
            Some("http") => AnyProvider::Http(http_from(&get, channel, clock.clone(), timeout)?),
            Some(other) => {
                return Err(ConfigError::Invalid {
                    var: kind_var,
                    problem: format!("{other:?}: use http or none"),
                })
            }
        };
        out.push(provider);
    }
    let mut it = out.into_iter();
    let mut next = || it.next().unwrap_or(AnyProvider::Disabled);
    Ok(PerChannel::from_fn(|_| next()))
}

fn http_from<C: Clock>(
    get: &impl Fn(&str) -> Option<String>,
    channel: Channel,
    clock: C,
    timeout: Duration,
) -> Result<HttpProvider<C>, ConfigError> {
    let v = vars(channel);
    let endpoint_var = v.endpoint;
    let raw = get(endpoint_var).ok_or(ConfigError::Missing(endpoint_var))?;
    let endpoint = reqwest::Url::parse(&raw).map_err(|e| ConfigError::Invalid {
        var: endpoint_var,
        problem: e.to_string(),
    })?;
    if !matches!(endpoint.scheme(), "http" | "https") || endpoint.host_str().is_none() {
        return Err(ConfigError::Invalid {
            var: endpoint_var,
            problem: "must be an http(s) URL with a host".into(),
        });
    }
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
        bearer_token: get(v.token).filter(|t| !t.is_empty()),
        timeout,
        idempotent,
        partition,
    };
    HttpProvider::new(cfg, clock).map_err(|e| ConfigError::Invalid {
        var: endpoint_var,
        problem: e.to_string(),
    })
}
