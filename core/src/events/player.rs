//! The local stand-in for the `events` function's event source mapping: reads the ledger's
//! stream shard by shard, hands each batch to the same [`super::handle`], and advances a
//! checkpoint (the last sequence number done, per shard) only past records the handler did
//! not fail — so a player killed between the ledger write and the publish, or between the
//! publish and the checkpoint, publishes on its next run (at least once, never lost).
//!
//! The checkpoint is a small JSON file, `remindctl-events-<stream>.json` under
//! [`std::env::temp_dir`] by default (one per stream ARN), written whole by a rename after
//! each batch. Deleting it replays the stream from its oldest record (DynamoDB keeps 24 h).
//!
//! Like the event source mapping's `MaximumRetryAttempts`, a record that fails
//! [`MAX_ATTEMPTS`] times in a row is given up on (logged at ERROR with its shard and
//! sequence number, where the on-failure destination would name it) and the shard moves on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::handle;
use crate::ports::{EventBus, LedgerStream, PortError};

/// Records per read (GetRecords' page; Lambda's default batch size for streams is 100).
pub const BATCH: u32 = 100;
/// Attempts at one record before the shard moves past it.
pub const MAX_ATTEMPTS: u32 = 3;

/// Where each shard has got to, kept in a file.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    done: BTreeMap<String, String>,
    /// Failures in a row at a shard's next record: (sequence number, count).
    failing: BTreeMap<String, (String, u32)>,
}

impl Checkpoint {
    /// The default file for `stream` (its ARN), under the system's temporary directory.
    pub fn default_path(stream: &str) -> PathBuf {
        let name: String = stream
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        std::env::temp_dir().join(format!("remindctl-events-{name}.json"))
    }

    /// Load `path` (a missing file is a fresh start; an unreadable one is an error naming it).
    pub fn load(path: &Path) -> Result<Self, String> {
        let done = match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| format!("checkpoint {} is not readable: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(format!("checkpoint {}: {e}", path.display())),
        };
        Ok(Self {
            path: path.to_owned(),
            done,
            failing: BTreeMap::new(),
        })
    }

    /// The last sequence number done on `shard`.
    pub fn position(&self, shard: &str) -> Option<&str> {
        self.done.get(shard).map(String::as_str)
    }

    fn advance(&mut self, shard: &str, seq: &str) -> Result<(), String> {
        self.done.insert(shard.to_owned(), seq.to_owned());
        let tmp = self.path.with_extension("json.tmp");
        let text = serde_json::to_string(&self.done).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|e| format!("checkpoint {}: {e}", self.path.display()))
    }

    /// Count a failure at `seq`: true once it has failed [`MAX_ATTEMPTS`] times in a row.
    fn exhausted(&mut self, shard: &str, seq: &str) -> bool {
        let entry = self
            .failing
            .entry(shard.to_owned())
            .or_insert_with(|| (seq.to_owned(), 0));
        if entry.0 != seq {
            *entry = (seq.to_owned(), 0);
        }
        entry.1 += 1;
        entry.1 >= MAX_ATTEMPTS
    }
}

/// What one pass over the stream did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    pub records: u32,
    pub published: u32,
    /// Records left for the next pass (they failed; their events are retried).
    pub failed: u32,
    /// Records given up on after [`MAX_ATTEMPTS`].
    pub given_up: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    #[error("reading the ledger stream: {0}")]
    Stream(#[from] PortError),
    #[error("{0}")]
    Checkpoint(String),
}

/// One pass: every shard read from its checkpoint to its end, batch by batch, each batch
/// handled and the checkpoint advanced past what succeeded. A shard stops at its first
/// failed record (order matters), until the next pass.
pub async fn play_once<S: LedgerStream, B: EventBus>(
    stream: &S,
    bus: &B,
    checkpoint: &mut Checkpoint,
) -> Result<Pass, PlayError> {
    let mut pass = Pass::default();
    for shard in stream.shards().await? {
        loop {
            let after = checkpoint.position(&shard).map(str::to_owned);
            let records = stream.read(&shard, after.as_deref(), BATCH).await?;
            if records.is_empty() {
                break;
            }
            let handled = handle(bus, &records).await;
            pass.records += records.len() as u32;
            pass.published += handled.published;
            let done = handled.failed_from.unwrap_or(records.len());
            let mut last = done.checked_sub(1).map(|i| &records[i]);
            if let Some(failed) = handled.failed_from.map(|i| &records[i]) {
                let seq = failed.change.sequence_number.as_deref().unwrap_or_default();
                if !checkpoint.exhausted(&shard, seq) {
                    pass.failed += (records.len() - done) as u32;
                    advance(checkpoint, &shard, last)?;
                    break;
                }
                tracing::error!(shard = %shard, sequence_number = seq, attempts = MAX_ATTEMPTS, "stream record failed every attempt; moving past it (the event source mapping would send it to its on-failure destination)");
                pass.given_up += 1;
                last = Some(failed);
            }
            advance(checkpoint, &shard, last)?;
        }
    }
    Ok(pass)
}

fn advance(
    checkpoint: &mut Checkpoint,
    shard: &str,
    last: Option<&aws_lambda_events::event::dynamodb::EventRecord>,
) -> Result<(), PlayError> {
    match last.and_then(|r| r.change.sequence_number.as_deref()) {
        Some(seq) => checkpoint
            .advance(shard, seq)
            .map_err(PlayError::Checkpoint),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
