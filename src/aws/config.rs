//! Where the system's resources are (tables, queues, shards), read once at cold start. A
//! missing or malformed variable fails fast with its name. Endpoints are not configuration
//! here: they come from the standard AWS chain.

use super::sqs::ChannelUrls;
use crate::config::{parse_in, ConfigError, Vars};

pub const REMINDERS_TABLE: &str = "REMINDERS_TABLE";
pub const DELIVERIES_TABLE: &str = "DELIVERIES_TABLE";
pub const DUE_SHARDS: &str = "DUE_SHARDS";
pub const METRICS_NAMESPACE: &str = "METRICS_NAMESPACE";
pub const QUEUE_URL_VARS: [&str; 3] = ["PUSH_QUEUE_URL", "EMAIL_QUEUE_URL", "SMS_QUEUE_URL"];
pub const DLQ_URL_VARS: [&str; 3] = ["PUSH_DLQ_URL", "EMAIL_DLQ_URL", "SMS_DLQ_URL"];

/// The due index's shards: the default and the bound.
pub use crate::domain::{DEFAULT_DUE_SHARDS, MAX_DUE_SHARDS};

/// Where the system's resources are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub reminders_table: String,
    pub deliveries_table: String,
    pub due_shards: u32,
    pub queue_urls: ChannelUrls,
    pub dlq_urls: ChannelUrls,
    /// The CloudWatch namespace of the EMF lines (the template: `Reminders/<stack name>`).
    pub metrics_namespace: String,
}

/// Every variable [`Settings`] reads.
pub const SETTINGS_VARS: [&str; 10] = [
    REMINDERS_TABLE,
    DELIVERIES_TABLE,
    DUE_SHARDS,
    METRICS_NAMESPACE,
    QUEUE_URL_VARS[0],
    QUEUE_URL_VARS[1],
    QUEUE_URL_VARS[2],
    DLQ_URL_VARS[0],
    DLQ_URL_VARS[1],
    DLQ_URL_VARS[2],
];

/// The template's outputs and the variables they configure (`remindctl --stack NAME`); a
/// template test holds the template to it.
pub const STACK_OUTPUTS: [(&str, &str); 10] = [
    ("RemindersTableName", REMINDERS_TABLE),
    ("DeliveriesTableName", DELIVERIES_TABLE),
    ("PushQueueUrl", QUEUE_URL_VARS[0]),
    ("EmailQueueUrl", QUEUE_URL_VARS[1]),
    ("SmsQueueUrl", QUEUE_URL_VARS[2]),
    ("PushDeadLetterQueueUrl", DLQ_URL_VARS[0]),
    ("EmailDeadLetterQueueUrl", DLQ_URL_VARS[1]),
    ("SmsDeadLetterQueueUrl", DLQ_URL_VARS[2]),
    ("DueShards", DUE_SHARDS),
    ("RetentionSeconds", crate::domain::retention::RETENTION_VAR),
];

impl Settings {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(&Vars::env())
    }

    /// Read from any lookup (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::from_vars(&Vars::new(get))
    }

    pub fn from_vars<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let urls = |names: [&'static str; 3]| -> Result<ChannelUrls, ConfigError> {
            Ok(ChannelUrls {
                push: vars.required(names[0])?,
                email: vars.required(names[1])?,
                sms: vars.required(names[2])?,
            })
        };
        let due_shards = match vars.get(DUE_SHARDS) {
            None => DEFAULT_DUE_SHARDS,
            Some(raw) => parse_in(DUE_SHARDS, &raw, 1..=MAX_DUE_SHARDS)?,
        };
        Ok(Self {
            reminders_table: vars.required(REMINDERS_TABLE)?,
            deliveries_table: vars.required(DELIVERIES_TABLE)?,
            due_shards,
            queue_urls: urls(QUEUE_URL_VARS)?,
            dlq_urls: urls(DLQ_URL_VARS)?,
            // Empty is unset, as everywhere in the template: an empty namespace would make
            // CloudWatch drop every metric without a word.
            metrics_namespace: vars
                .get(METRICS_NAMESPACE)
                .filter(|ns| !ns.trim().is_empty())
                .unwrap_or_else(|| crate::telemetry::METRICS_NAMESPACE.to_owned()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env() -> HashMap<&'static str, String> {
        let mut m = HashMap::new();
        m.insert(REMINDERS_TABLE, "reminders".to_owned());
        m.insert(DELIVERIES_TABLE, "deliveries".to_owned());
        for v in QUEUE_URL_VARS.into_iter().chain(DLQ_URL_VARS) {
            m.insert(v, format!("http://q/{v}"));
        }
        m
    }

    fn load(m: &HashMap<&'static str, String>) -> Result<Settings, ConfigError> {
        Settings::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn reads_everything_with_defaults() {
        let s = load(&env()).unwrap();
        assert_eq!(s.due_shards, DEFAULT_DUE_SHARDS);
        assert_eq!(s.dlq_urls.sms, "http://q/SMS_DLQ_URL");
    }

    #[test]
    fn names_the_missing_or_invalid_variable() {
        let mut m = env();
        m.remove("EMAIL_DLQ_URL");
        assert_eq!(load(&m), Err(ConfigError::Missing("EMAIL_DLQ_URL")));
        let mut m = env();
        m.insert(DUE_SHARDS, "0".into());
        let err = load(&m).unwrap_err();
        assert!(err.to_string().contains("DUE_SHARDS"), "{err}");
        m.insert(DUE_SHARDS, "lots".into());
        assert!(matches!(
            load(&m),
            Err(ConfigError::Invalid {
                var: DUE_SHARDS,
                ..
            })
        ));
    }
}
