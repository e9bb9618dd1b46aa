//! `remindctl local up | run | receive | api | events | feedback`: the template's resources on
//! an emulator, the pipeline played locally (the scheduler's schedule, each channel's event
//! source mapping, the ledger stream's and the SES feedback queue's), a provider on localhost
//! that prints what it receives, the HTTP API on localhost, the outcome events the bus
//! delivered, and an SES bounce or complaint to feed the pipeline.

mod api;
mod events;
mod feedback;
mod publish;
mod receive;
mod run;
mod summary;
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
    Feedback(feedback::FeedbackArgs),
}

pub async fn run(cmd: LocalCommand) -> Result<(), String> {
    match cmd {
        LocalCommand::Up(args) => up::run(args).await,
        LocalCommand::Run(args) => run::run(args).await,
        // Blocking: it is the process's only work.
        LocalCommand::Receive(args) => receive::run(args),
        LocalCommand::Api(args) => api::run(args).await,
        LocalCommand::Events(args) => events::run(args).await,
        LocalCommand::Feedback(args) => feedback::run(args).await,
    }
}

/// Creating or driving resources is for emulators only: the template owns them on AWS.
fn require_emulator() -> Result<String, String> {
    env("AWS_ENDPOINT_URL").ok_or_else(|| {
        "AWS_ENDPOINT_URL is not set: `local` commands only run against an emulator; start one \
         with `eval \"$(infra/emulator.sh)\"` (moto) or point it at LocalStack; deploy \
         template.yaml for AWS"
            .to_owned()
    })
}
