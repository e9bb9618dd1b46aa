//! The function wiring, the top of the library: what each Lambda reads from its environment
//! (the registry the template's consistency tests check against `template.yaml`) and what
//! every function does once per cold start. This is the one module that knows every feature;
//! the features know nothing of it.

use crate::aws::config::SETTINGS_VARS;
use crate::aws::{sdk_config, Adapters, Settings};
use crate::config::ConfigError;

/// The functions the template deploys.
pub const FUNCTIONS: [&str; 3] = ["scheduler", "consumer", "redrive"];

/// Every environment variable `function` reads (the template must set them all).
pub fn reads(function: &str) -> Vec<&'static str> {
    let mut vars: Vec<&'static str> = SETTINGS_VARS.to_vec();
    vars.push("RUST_LOG");
    match function {
        "consumer" => {
            vars.extend(crate::consumer::config::VARS);
            vars.extend(crate::providers::VARS);
        }
        "scheduler" => vars.extend(crate::scheduler::config::VARS),
        "redrive" => vars.extend(crate::redrive::VARS),
        _ => {}
    }
    vars
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
