//! `remindctl local api`: the HTTP API's own router (`reminders_api::router`, what the `api`
//! function runs behind API Gateway) on localhost, against the emulator, with no
//! authorization: for developing an application before deploying.

use reminders::aws::{Adapters, Settings};
use reminders::clock::SystemClock;
use reminders_api::{router, App, Defaults};

use super::require_emulator;

/// Serve the HTTP API on 127.0.0.1 against the emulator's tables (no authorization: for
/// development only), until Ctrl-C.
///
/// Example: eval "$(remindctl local up)"; remindctl local api --port 8081 &
///          curl -X PUT localhost:8081/v1/reminders/order-42 -d @reminder.json
#[derive(Debug, clap::Args)]
pub struct ApiArgs {
    /// Port on 127.0.0.1 (0 picks a free one; the first line printed names it).
    #[arg(long, default_value_t = 8081)]
    port: u16,
}

pub async fn run(args: ApiArgs) -> Result<(), String> {
    let endpoint = require_emulator()?;
    let settings = Settings::from_env().map_err(|e| e.to_string())?;
    let sdk = reminders::aws::sdk_config().await;
    let adapters = Adapters::new(&sdk, &settings);
    let app = App {
        store: adapters.reminders,
        ledger: adapters.ledger,
        clock: SystemClock,
        defaults: Defaults::from_env().map_err(|e| e.to_string())?,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", args.port))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!(
        "# the HTTP API on http://{addr} (no authorization), tables on {endpoint}; Ctrl-C stops"
    );
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| format!("serving the API: {e}"))
}
