//! The query parameters the list routes share: a subscriber's reminders and a subscriber's
//! series read their page size through the one parser here, so both answer the same `400`.

use std::collections::HashMap;

use crate::error::ApiError;

/// Page sizes of the subscriber listings.
const DEFAULT_LIMIT: u32 = 25;
const MAX_LIMIT: u32 = 100;

/// A list's `limit` query parameter: 1 to 100, 25 when absent.
pub fn page_limit(query: &HashMap<String, String>) -> Result<u32, ApiError> {
    match query.get("limit") {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => raw
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                ApiError::invalid(
                    "limit",
                    format!("limit: must be a whole number from 1 to {MAX_LIMIT}"),
                )
            }),
    }
}

/// The seal of the lists' cursors: derived from the stack's suppression key, so that every
/// instance opens every other's; without one (a local run), this process's own.
pub async fn cursor_seal(
    defaults: &crate::Defaults,
) -> Result<reminders::domain::CursorSeal, ApiError> {
    use reminders::domain::CursorSeal;
    match &defaults.suppression_key {
        Some(source) => Ok(CursorSeal::from_key(&source.get().await?)),
        None => Ok(CursorSeal::process_local()),
    }
}
