//! Operator commands against AWS or an emulator, with the functions' configuration:
//! `remind create | cancel | show | quarantined` (`remind`, `show`), `series create | show | cancel | list` (`series`), `subscriber set | show`
//! (`subscriber`), `dlq summary | show` (`dlq`) and `redrive` (`redrive`). What they share
//! lives here: the ports, the first-line errors, the flag parsers and who the operator is.

pub mod dlq;
pub mod redrive;
pub mod remind;
pub mod series;
mod show;
pub mod subscriber;
pub mod suppression;
mod wording;

use reminders::aws::{Adapters, Settings};
use reminders::clock::SystemClock;
use reminders::config::env;
use reminders::domain::{Channel, DeadReason, PerChannel, Retention};
use reminders::ports::PortSet;
use reminders::providers::AnyProvider;

/// The functions' retention (`RETENTION_SECS`), so what the CLI writes expires with the rest.
fn retention() -> Result<Retention, String> {
    Retention::from_env().map_err(|e| e.to_string())
}

/// The pipeline's ports on AWS (or an emulator), as the functions build them: the operator
/// commands and `local run` alike.
pub(crate) type OpsPorts = PortSet<
    SystemClock,
    reminders::aws::dynamo::DynamoReminderStore,
    reminders::aws::dynamo::DynamoLedger,
    reminders::aws::dynamo::DynamoGate,
    reminders::aws::SqsQueues,
    reminders::aws::SqsDeadLetters,
    AnyProvider<SystemClock>,
>;

/// The adapters the functions use; no provider: an operator command never sends.
async fn ports() -> Result<OpsPorts, String> {
    let settings = Settings::from_env().map_err(|e| e.to_string())?;
    let sdk = reminders::aws::sdk_config().await;
    let a = Adapters::new(&sdk, &settings);
    Ok(PortSet {
        clock: SystemClock,
        reminders: a.reminders,
        ledger: a.ledger,
        gate: a.gate,
        queue: a.queues,
        dead_letters: a.dead_letters,
        providers: PerChannel::from_fn(|_| AnyProvider::Disabled),
    })
}

fn err(e: impl std::fmt::Display) -> String {
    // The first line only: SDK errors carry multi-line context.
    e.to_string().lines().next().unwrap_or_default().to_owned()
}

fn parse_channel(s: &str) -> Result<Channel, String> {
    s.parse()
        .map_err(|e: reminders::domain::IdError| e.to_string())
}

fn parse_reason(s: &str) -> Result<DeadReason, String> {
    s.parse()
        .map_err(|e: reminders::domain::reason::UnknownReason| e.to_string())
}

/// Who runs the command, for the audit trail: `$USER` or `$LOGNAME`; none is an error (an
/// audit entry must name someone).
fn operator_default() -> Result<String, String> {
    env("USER")
        .or_else(|| env("LOGNAME"))
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| "--operator: required (no $USER or $LOGNAME to default to)".into())
}
