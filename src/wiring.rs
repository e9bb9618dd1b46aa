//! The function wiring, the top of the library: what each Lambda reads from its environment
//! (the registry the template's consistency tests check against `template.yaml`) and what
//! every function does once per cold start. This is the one module that knows every feature;
//! the features know nothing of it.

use crate::aws::config::SETTINGS_VARS;
use crate::aws::{sdk_config, Adapters, Settings};
use crate::config::ConfigError;

/// The functions the template deploys.
pub const FUNCTIONS: [&str; 6] = [
    "scheduler",
    "consumer",
    "redrive",
    "api",
    "events",
    "feedback",
];

/// Every environment variable `function` reads (the template must set them all).
pub fn reads(function: &str) -> Vec<&'static str> {
    let mut vars: Vec<&'static str> = SETTINGS_VARS.to_vec();
    vars.push("RUST_LOG");
    match function {
        "consumer" => {
            vars.extend(crate::consumer::config::VARS);
            vars.extend(crate::providers::VARS);
            vars.push(crate::providers::secret::SUPPRESSION_KEY_SECRET_VAR);
        }
        "scheduler" => {
            vars.extend(crate::scheduler::config::VARS);
            // A sole channel's message carries its address's keyed hash (the consumer's one
            // read).
            vars.push(crate::providers::secret::SUPPRESSION_KEY_SECRET_VAR);
        }
        "redrive" => vars.extend(crate::redrive::VARS),
        // The HTTP API writes reminders (their TTLs), defaults their freshness window and
        // refuses SMS numbers outside the allowed calling codes.
        "api" => {
            vars.extend([
                crate::domain::retention::RETENTION_VAR,
                crate::reminder_writes::FRESHNESS_VAR,
                crate::domain::sms_countries::SMS_COUNTRIES_VAR,
                // Erasure finds a subscriber's suppressions by their keyed hash, and says it
                // happened on the stack's bus.
                crate::providers::secret::SUPPRESSION_KEY_SECRET_VAR,
                crate::aws::eventbridge::EVENT_BUS_VAR,
            ]);
            vars.extend(api_auth::VARS);
        }
        "events" => vars.extend(crate::aws::eventbridge::VARS),
        "feedback" => vars.extend([
            crate::providers::secret::SUPPRESSION_KEY_SECRET_VAR,
            crate::feedback::FEEDBACK_DLQ_VAR,
        ]),
        _ => {}
    }
    vars
}

/// The HTTP API's authorization settings (the `api` crate's `caller` module reads them).
pub mod api_auth {
    /// `on` (default) or `off`: a caller reaches only the reminders it created.
    pub const OWNER_ISOLATION_VAR: &str = "OWNER_ISOLATION";
    /// `true` (default) or `false`: a JWT caller needs each route's scope.
    pub const REQUIRE_SCOPES_VAR: &str = "API_SCOPE_REQUIRED";
    /// Put before each scope's name.
    pub const SCOPE_PREFIX_VAR: &str = "API_SCOPE_PREFIX";
    /// The JWT claim that holds an end user's own subscriber id.
    pub const SUBSCRIBER_CLAIM_VAR: &str = "SUBSCRIBER_CLAIM";
    pub const VARS: [&str; 4] = [
        OWNER_ISOLATION_VAR,
        REQUIRE_SCOPES_VAR,
        SCOPE_PREFIX_VAR,
        SUBSCRIBER_CLAIM_VAR,
    ];
}

/// Every AWS SDK operation `function`'s code can call, as the SDK names them
/// (`Service.Operation`). The template test maps each to its IAM action and checks the
/// function's role grants exactly those (plus what the platform needs on its behalf); the
/// Runtime API tests check every call a bootstrap really made is listed here.
pub fn aws_calls(function: &str) -> &'static [&'static str] {
    match function {
        "scheduler" => &[
            "DynamoDB.GetItem",
            "DynamoDB.PutItem",
            "DynamoDB.Query",
            "DynamoDB.Scan",
            "DynamoDB.UpdateItem",
            "SQS.SendMessageBatch",
            "Secrets Manager.GetSecretValue",
        ],
        "consumer" => &[
            "DynamoDB.BatchGetItem",
            "DynamoDB.DeleteItem",
            "DynamoDB.GetItem",
            "DynamoDB.PutItem",
            "DynamoDB.UpdateItem",
            "SQS.ChangeMessageVisibility",
            "SQS.SendMessageBatch",
            "SQS.SendMessage",
            "SESv2.SendEmail",
            "SNS.Publish",
            "SNS.CreatePlatformEndpoint",
            "Secrets Manager.GetSecretValue",
        ],
        "redrive" => &[
            "DynamoDB.GetItem",
            "DynamoDB.PutItem",
            "DynamoDB.UpdateItem",
            "SQS.ReceiveMessage",
            "SQS.DeleteMessage",
            "SQS.ChangeMessageVisibility",
            "SQS.SendMessageBatch",
        ],
        // Reminders: get, conditional put, status update, and the subscriber index query;
        // the ledger: get and the cancel's conditional puts.
        // Erasure: conditional deletes, and the suppression key.
        "api" => &[
            "DynamoDB.BatchGetItem",
            "DynamoDB.DeleteItem",
            "DynamoDB.GetItem",
            "DynamoDB.PutItem",
            "DynamoDB.Query",
            "DynamoDB.UpdateItem",
            "EventBridge.PutEvents",
            "Secrets Manager.GetSecretValue",
        ],
        // The stream itself is read by Lambda's event source mapping, with the role's
        // dynamodb:GetRecords and friends; the function only publishes.
        "events" => &["EventBridge.PutEvents"],
        // Suppressions (conditional puts of `suppress#` items), the key, and the DLQ for a
        // body that is not SES feedback.
        "feedback" => &[
            "DynamoDB.PutItem",
            "SQS.SendMessage",
            "Secrets Manager.GetSecretValue",
        ],
        _ => &[],
    }
}

/// What a function builds once per cold start.
pub struct ColdStart {
    pub settings: Settings,
    pub adapters: Adapters,
    pub sdk: aws_config::SdkConfig,
}

/// Everything a function does once per cold start: JSON logs, typed configuration (failing
/// with the variable's name), one SDK configuration, the adapters. No network is touched.
pub async fn cold_start(function: &'static str) -> Result<ColdStart, ConfigError> {
    crate::telemetry::init();
    let settings = Settings::from_env()?;
    let sdk = sdk_config().await;
    let adapters = Adapters::new(&sdk, &settings);
    tracing::info!(function, due_shards = settings.due_shards, "cold start");
    Ok(ColdStart {
        settings,
        adapters,
        sdk,
    })
}

/// The invocation's deadline from the runtime's `Lambda-Runtime-Deadline-Ms` (epoch ms), or
/// `None` when it is implausible: `cargo lambda watch` sends a relative `600000`, which read
/// as an epoch is in 1970 — every record would be released and every run stopped at once.
/// A Lambda runs at most 15 minutes, so a real deadline lies within that of now.
pub fn invocation_deadline(
    raw_ms: u64,
    now: crate::clock::Timestamp,
) -> Option<crate::clock::Timestamp> {
    let deadline = crate::clock::Timestamp::from_millis(i64::try_from(raw_ms).ok()?);
    let latest = now.plus(std::time::Duration::from_secs(16 * 60));
    // A little behind now is a deadline already passed, not a wrong clock.
    let earliest = now.minus(std::time::Duration::from_secs(60));
    if deadline < earliest || deadline > latest {
        tracing::warn!(
            raw_ms,
            "implausible invocation deadline (a relative one, as cargo lambda watch sends?): running without one"
        );
        return None;
    }
    Some(deadline)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Timestamp;

    #[test]
    fn a_relative_or_absurd_deadline_is_treated_as_absent() {
        let now = Timestamp::from_millis(1_800_000_000_000);
        assert_eq!(
            invocation_deadline(600_000, now),
            None,
            "cargo lambda watch"
        );
        assert_eq!(invocation_deadline(u64::MAX, now), None);
        let real = 1_800_000_000_000 + 50_000;
        assert_eq!(
            invocation_deadline(real, now),
            Some(Timestamp::from_millis(1_800_000_050_000))
        );
        let just_passed = 1_800_000_000_000 - 5_000;
        assert!(invocation_deadline(just_passed, now).is_some());
    }

    #[test]
    fn every_function_reads_the_shared_settings() {
        for f in FUNCTIONS {
            let vars = reads(f);
            assert!(
                vars.contains(&"REMINDERS_TABLE") && vars.contains(&"RUST_LOG"),
                "{f}"
            );
        }
        assert!(reads("consumer").contains(&"RETENTION_SECS"));
        assert!(reads("redrive").contains(&"RETENTION_SECS"));
    }
}
