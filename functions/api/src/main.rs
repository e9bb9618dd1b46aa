//! API Lambda: the HTTP API's router (`reminders_api::router`) behind API Gateway, through the
//! runtime's own HTTP adapter. All of it is the library; this file wires.

use lambda_http::{run, Error};
use reminders::clock::SystemClock;
use reminders_api::{router, App, Auth, Defaults};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let start = reminders::wiring::cold_start("api").await?;
    let app = App {
        store: start.adapters.reminders,
        ledger: start.adapters.ledger,
        clock: SystemClock,
        defaults: Defaults::from_env_with_key(&start.sdk)?,
        auth: Auth::from_env()?,
    };
    run(router(app)).await
}
