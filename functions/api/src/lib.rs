//! The HTTP API (docs/design.md, "HTTP API"): applications in any language create, edit, cancel and
//! follow reminders through the library's own writes (`reminders::reminder_writes`), never by
//! re-implementing the shard hash or the cancel protocol.
//!
//! | call | answer |
//! |---|---|
//! | `PUT /v1/reminders/{id}` | `201` created; `200` the same body again, or an edit while one is allowed; `409` once it is not |
//! | `GET /v1/reminders/{id}` | the reminder and each channel's delivery state; `404` |
//! | `DELETE /v1/reminders/{id}` | cancel, per channel: cancelled, in flight, delivered, dead or expired; `404` |
//! | `GET /v1/subscribers/{id}/reminders` | a subscriber's reminders, newest due first, a page at a time |
//! | `PUT /v1/subscribers/{id}/preferences` | replace a subscriber's opt-outs, quiet hours and fallback order |
//! | `GET /v1/subscribers/{id}/preferences` | them; `404` when none were set |
//! | `PUT /v1/series/{id}` | a recurring series: `201` created; `200` the same body again, or an edit (occurrences not yet enqueued follow it); `409` once cancelled or ended |
//! | `GET /v1/series/{id}` | the series, its next occurrences and those made, each with its status |
//! | `DELETE /v1/series/{id}` | cancel the series and every occurrence not yet sent, per channel |
//! | `GET /v1/subscribers/{id}/series` | a subscriber's series, by id, a page at a time |
//! | `DELETE /v1/subscribers/{id}` | erase the subscriber: cancel their pending reminders, delete their reminders, preferences and suppressions; what was removed, in counts |
//!
//! The same [`router`] runs on Lambda (`lambda_http`, `main.rs`) and locally
//! (`remindctl local api`); `openapi.yaml` beside this crate documents it, and a test holds
//! the router to every status code the document lists.

mod body;
pub mod caller;
mod erase;
mod error;
mod handlers;
mod occurrences;
mod preferences;
mod query;
mod series;
mod view;

use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use reminders::clock::Clock;
use reminders::config::ConfigError;
use reminders::domain::{Retention, SmsCountries};
use reminders::ports::{Eraser, Ledger, ReminderStore, SeriesStore, SubscriberIndex};
use reminders::providers::secret::SuppressionKeySource;

pub use body::MAX_REQUEST_BYTES;
pub use caller::{Auth, Identity};

/// What the API needs besides its ports: the defaults a body may leave out, and the limits
/// a body is held to.
#[derive(Debug, Clone)]
pub struct Defaults {
    pub freshness: Duration,
    pub retention: Retention,
    /// Where SMS may go (`SMS_ALLOWED_COUNTRY_CODES`, the consumer's variable too).
    pub sms_countries: SmsCountries,
    /// The stack's suppression key (`SUPPRESSION_KEY_SECRET_ARN`), for an erasure to find the
    /// suppressions of a subscriber's addresses; without it, an erasure lifts none.
    pub suppression_key: Option<Arc<SuppressionKeySource>>,
    /// Where an erasure's `Subscriber Erased` event goes (`EVENT_BUS_NAME`); none, no event.
    pub erasure_events: Option<Arc<reminders::aws::eventbridge::EventBridgeBus>>,
}

impl Defaults {
    /// `FRESHNESS_SECS` (the retry policy's default freshness when unset),
    /// `RETENTION_SECS` (the same variables `remindctl remind create` reads) and
    /// `SMS_ALLOWED_COUNTRY_CODES`.
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            freshness: reminders::reminder_writes::default_freshness()?,
            retention: Retention::from_env()?,
            sms_countries: SmsCountries::from_env()?,
            suppression_key: None,
            erasure_events: None,
        })
    }

    /// [`Defaults::from_env`] with the suppression key's source (`SUPPRESSION_KEY_SECRET_ARN`,
    /// read on first use; or locally `SUPPRESSION_KEY`).
    pub fn from_env_with_key(sdk: &aws_config::SdkConfig) -> Result<Self, ConfigError> {
        // Optional here (the template sets it): without it an erasure says it looked up no
        // suppressions, rather than the API failing to start.
        use reminders::providers::secret::{SUPPRESSION_KEY_SECRET_VAR, SUPPRESSION_KEY_VAR};
        let env = reminders::config::env;
        let key = match env(SUPPRESSION_KEY_SECRET_VAR).or_else(|| env(SUPPRESSION_KEY_VAR)) {
            None => None,
            Some(_) => reminders::providers::secret::suppression_key(env, sdk)?,
        };
        let bus =
            reminders::aws::eventbridge::EventBridgeBus::optional(sdk, reminders::config::env);
        Ok(Self {
            suppression_key: key.map(Arc::new),
            erasure_events: bus.map(Arc::new),
            ..Self::from_env()?
        })
    }
}

/// The ports, defaults and authorization settings every handler shares.
pub struct App<S, L, C> {
    pub store: S,
    pub ledger: L,
    pub clock: C,
    pub defaults: Defaults,
    pub auth: Auth,
}

impl<S, L, C> axum::extract::FromRequestParts<Arc<App<S, L, C>>> for caller::Caller
where
    S: Send + Sync,
    L: Send + Sync,
    C: Send + Sync,
{
    type Rejection = error::ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        app: &Arc<App<S, L, C>>,
    ) -> Result<Self, error::ApiError> {
        caller::Caller::of(parts, &app.auth)
    }
}

/// The API's routes over any reminders store, ledger and clock: DynamoDB on Lambda and on an
/// emulator, memory in tests.
pub fn router<S, L, C>(app: App<S, L, C>) -> Router
where
    S: ReminderStore + SubscriberIndex + Eraser + SeriesStore + 'static,
    L: Ledger + 'static,
    C: Clock + Send + Sync + 'static,
{
    use erase::erase;
    use handlers::{cancel, list, put, show};
    Router::new()
        .route(
            "/v1/reminders/{id}",
            get(show::<S, L, C>)
                .put(put::<S, L, C>)
                .delete(cancel::<S, L, C>),
        )
        .route("/v1/subscribers/{id}/reminders", get(list::<S, L, C>))
        .route(
            "/v1/subscribers/{id}",
            axum::routing::delete(erase::<S, L, C>),
        )
        .route(
            "/v1/series/{id}",
            get(series::show::<S, L, C>)
                .put(series::put::<S, L, C>)
                .delete(series::cancel::<S, L, C>),
        )
        .route("/v1/subscribers/{id}/series", get(series::list::<S, L, C>))
        .route(
            "/v1/subscribers/{id}/preferences",
            get(preferences::show::<S, L, C>).put(preferences::put::<S, L, C>),
        )
        .fallback(handlers::no_route)
        .method_not_allowed_fallback(handlers::wrong_method)
        // The handlers measure the body themselves, so an oversized one gets the API's JSON
        // 413; axum's own cap stays above it for anything larger.
        .layer(axum::extract::DefaultBodyLimit::max(4 * MAX_REQUEST_BYTES))
        .with_state(Arc::new(app))
}
