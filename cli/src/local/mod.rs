//! `remindctl local up | run | receive | api | events`: the template's resources on an
//! emulator, the pipeline played locally (the scheduler's schedule, each channel's event
//! source mapping and the ledger stream's), a provider on localhost that prints what it
//! receives, the HTTP API on localhost, and the outcome events the bus delivered.

mod api;
mod events;
mod publish;
mod receive;
mod run;
mod up;

use reminders::config::env;

/// The pipeline on an emulator (moto, LocalStack): needs AWS_ENDPOINT_URL.
#[derive(Debug, clap::Subcommand)]
pub enum LocalCommand {
    Up(up::UpArgs),
    Run(run::RunArgs),
    Receive(receive::ReceiveArgs),
    Api(api::ApiArgs),
    Events(events::EventsArgs),
}

pub async fn run(cmd: LocalCommand) -> Result<(), String> {
    match cmd {
        LocalCommand::Up(args) => up::run(args).await,
        LocalCommand::Run(args) => run::run(args).await,
        // Blocking: it is the process's only work.
        LocalCommand::Receive(args) => receive::run(args),
        LocalCommand::Api(args) => api::run(args).await,
        LocalCommand::Events(args) => events::run(args).await,
    }
}

/// Creating or driving resources is for emulators only: the template owns them on AWS.
fn require_emulator() -> Result<String, String> {
    env("AWS_ENDPOINT_URL").ok_or_else(|| {
        "AWS_ENDPOINT_URL is not set: `local` commands only run against an emulator (moto, \
         LocalStack); deploy template.yaml for AWS"
            .to_owned()
    })
}
