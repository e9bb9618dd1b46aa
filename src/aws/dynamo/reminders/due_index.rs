//! Which due index the scheduler reads: `due-recipients-index` (it projects the addresses,
//! for the consumer's one read) once it answers, and the first `due-index` while it does not
//! (a stack deployed before it, an update still creating or backfilling it). A refusal that
//! names the index switches this instance to `due-index` for [`RETRY_AFTER`]; then the new
//! one is tried again. Both indexes hold the same items (same keys, both sparse on
//! `due_shard`), so either answers the same reminders; only the addresses differ.

use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::error::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::aws::dynamo::{DUE_INDEX, DUE_RECIPIENTS_INDEX};

/// How long an instance reads `due-index` after `due-recipients-index` refused it.
pub const RETRY_AFTER: Duration = Duration::from_secs(300);

/// Until when (epoch ms) this instance reads the first index; 0: the new one.
#[derive(Debug, Clone, Default)]
pub(in crate::aws::dynamo) struct DueIndexChoice(Arc<AtomicI64>);

fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    since.map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// DynamoDB's answer when an index does not exist or cannot be read yet: `ValidationException`
/// ("The table does not have the specified index", "Cannot read from backfilling global
/// secondary index"). The emulator (moto) answers a missing index `ResourceNotFoundException`
/// naming it ("Invalid index: due-recipients-index for table: …"); a missing table names no
/// index, and is no reason to read another one.
fn names_a_missing_index<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> bool {
    let SdkError::ServiceError(service) = e else {
        return false;
    };
    let err = service.err();
    let message = err.message().unwrap_or_default();
    let lower = message.to_ascii_lowercase();
    match err.code() {
        // The two answers DynamoDB documents for an index it cannot serve: any other
        // validation error (a malformed request) is a bug to see, not a reason to switch.
        Some("ValidationException") => {
            lower.contains("does not have the specified index")
                || lower.contains("backfilling global secondary index")
        }
        Some("ResourceNotFoundException") => message.contains(DUE_RECIPIENTS_INDEX),
        _ => false,
    }
}

impl DueIndexChoice {
    /// The index to read now.
    pub(in crate::aws::dynamo) fn current(&self) -> &'static str {
        if self.0.load(Ordering::Relaxed) > now_ms() {
            DUE_INDEX
        } else {
            DUE_RECIPIENTS_INDEX
        }
    }

    /// Run `read` on the current index; when `due-recipients-index` is refused as missing or
    /// backfilling, on `due-index` instead (logged once per switch).
    pub(in crate::aws::dynamo) async fn read<T, E, R, Fut>(
        &self,
        read: impl Fn(&'static str) -> Fut,
    ) -> Result<T, SdkError<E, R>>
    where
        E: ProvideErrorMetadata,
        Fut: Future<Output = Result<T, SdkError<E, R>>>,
    {
        let index = self.current();
        match read(index).await {
            Err(e) if index == DUE_RECIPIENTS_INDEX && names_a_missing_index(&e) => {
                let until = now_ms().saturating_add(RETRY_AFTER.as_millis() as i64);
                self.0.store(until, Ordering::Relaxed);
                tracing::warn!(
                    index = DUE_RECIPIENTS_INDEX,
                    fallback = DUE_INDEX,
                    error = ?e.message(),
                    "due index with recipients not readable (not created yet, or backfilling): \
                     reading the first one, whose messages take two reads each"
                );
                read(DUE_INDEX).await
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::operation::query::QueryError;
    use aws_smithy_types::error::ErrorMetadata;

    use super::*;

    fn refused(code: &str, message: &str) -> SdkError<QueryError, ()> {
        let meta = ErrorMetadata::builder().code(code).message(message).build();
        SdkError::service_error(QueryError::generic(meta), ())
    }

    #[test]
    fn a_missing_or_backfilling_index_is_told_from_other_refusals() {
        let missing = [
            (
                "ValidationException",
                "The table does not have the specified index: due-recipients-index",
            ),
            (
                "ValidationException",
                "Cannot read from backfilling global secondary index: due-recipients-index",
            ),
            // moto's answer.
            (
                "ResourceNotFoundException",
                "Invalid index: due-recipients-index for table: rem-1. Available indexes are: due-index",
            ),
        ];
        for (code, message) in missing {
            assert!(
                names_a_missing_index(&refused(code, message)),
                "{code}: {message}"
            );
        }
        let other = [
            ("ResourceNotFoundException", "Requested resource not found"),
            // A table whose name says index, missing: not the index's absence.
            (
                "ResourceNotFoundException",
                "Requested resource not found: Table: rem-index not found",
            ),
            ("ValidationException", "ExclusiveStartKey is invalid"),
            // A malformed request naming an index is a bug to see, not a reason to switch.
            (
                "ValidationException",
                "1 validation error detected: Value 'due index' at 'indexName' failed",
            ),
            ("ProvisionedThroughputExceededException", "index throttled"),
        ];
        for (code, message) in other {
            assert!(
                !names_a_missing_index(&refused(code, message)),
                "{code}: {message}"
            );
        }
    }
}
