//! `remindctl local api`: the HTTP API's own router (`reminders_api::router`, what the `api`
//! function runs behind API Gateway) on localhost, against the emulator: for developing an
//! application before deploying. Without API Gateway there is no authorizer: every call is
//! an operator's, unless `--trust-identity-header` takes the caller and its claims from
//! headers, so owner isolation, scopes and end-user tokens behave as deployed.

use reminders::aws::{Adapters, Settings};
use reminders::clock::SystemClock;
use reminders_api::{router, App, Auth, Defaults, Identity};

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
    /// Development only: take the caller from the x-reminders-caller header and its JWT
    /// claims from x-reminders-claims (a JSON object of strings; `scope` space-separated), as
    /// API Gateway's authorizer would state them; a call without them is refused 401. The
    /// deployed function never reads these headers.
    #[arg(long)]
    trust_identity_header: bool,
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
        defaults: Defaults::from_env_with_key(&sdk).map_err(|e| e.to_string())?,
        auth: Auth {
            identity: if args.trust_identity_header {
                Identity::TrustHeaders
            } else {
                Identity::Operator
            },
            ..Auth::from_env().map_err(|e| e.to_string())?
        },
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", args.port))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let who = if args.trust_identity_header {
        "callers from x-reminders-caller and x-reminders-claims"
    } else {
        "no authorization"
    };
    println!("# the HTTP API on http://{addr} ({who}), tables on {endpoint}; Ctrl-C stops");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| format!("serving the API: {e}"))
}
