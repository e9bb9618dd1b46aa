//! What a scheduler run did: its counts, the AWS requests it made, the shards that failed, and
//! its Embedded Metric Format line for the alarms.

use serde::Serialize;

use crate::clock::Timestamp;
use crate::domain::ReminderId;

/// AWS requests made by a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Requests {
    pub queries: u32,
    pub send_batches: u32,
    pub writes: u32,
}

/// A shard whose due-index query failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedShard {
    pub shard: u32,
    /// Runs in a row this shard has failed, this one included (as this function saw them).
    pub runs_in_a_row: u32,
    pub error: String,
}

/// What a run did (the Lambda's output).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunReport {
    /// Index items counted against the scan budget (taken or unschedulable).
    pub scanned: u32,
    pub picked: u32,
    /// Items of subscribers past their cap this run: left for later runs, costing no one
    /// else's budget.
    pub skipped_over_cap: u32,
    /// Items taken out of the due index as `invalid`, with the field at fault.
    pub quarantined: u32,
    /// Due-index queries that failed (those shards wait for the next run).
    pub query_failures: u32,
    /// Shards whose query failed this run, each with how many runs in a row it has failed
    /// and the error (its reminders wait until it answers).
    pub failed_shards: Vec<FailedShard>,
    /// Index items the sweep read this run (0 when no sweep ran).
    pub swept: u32,
    /// Sweep pages that failed this run (the sweep goes on next run).
    pub sweep_failures: u32,
    pub enqueued: u32,
    pub messages_sent: u32,
    pub expired: u32,
    /// Reminders left in the index because a message did not go out, or their group was not
    /// started before the deadline (taken again next run).
    pub send_failed: u32,
    /// Edited or cancelled between the scan and the mark.
    pub changed: u32,
    /// Marks (or quarantines) that failed (DynamoDB error): sent but still in the index, so
    /// sent again next run — the ledger makes that one send.
    pub mark_failed: u32,
    pub stopped_at_deadline: bool,
    /// How late the oldest due reminder this run found was (its start − `due_at`, whole
    /// seconds; 0 when none was late): the scheduler's backlog, alarmed on.
    pub backlog_age_secs: u64,
    pub requests: Requests,
    /// Enqueued reminders in the order they were taken.
    #[serde(skip)]
    pub enqueued_ids: Vec<(ReminderId, Timestamp)>,
}

impl RunReport {
    /// Shards that failed on this run and the one before: a lasting failure, not a blip.
    pub fn shards_failing_repeatedly(&self) -> u32 {
        let n = self.failed_shards.iter().filter(|f| f.runs_in_a_row > 1);
        u32::try_from(n.count()).unwrap_or(u32::MAX)
    }

    /// One CloudWatch Embedded Metric Format line in `namespace` (dimension `function`), for
    /// the alarms: the heartbeat (`scheduler_runs`, one per run that answered), the backlog,
    /// failing shards, quarantined items and runs that stopped early.
    pub fn emf(&self, at: Timestamp, namespace: &str) -> String {
        let counts = [
            ("scheduler_runs", 1),
            ("scheduler_enqueued", self.enqueued),
            ("scheduler_expired", self.expired),
            ("scheduler_quarantined", self.quarantined),
            ("scheduler_send_failed", self.send_failed),
            ("scheduler_mark_failed", self.mark_failed),
            ("scheduler_query_failures", self.query_failures),
            ("scheduler_shards_failing", self.shards_failing_repeatedly()),
            ("scheduler_swept", self.swept),
            ("scheduler_sweep_failures", self.sweep_failures),
            ("scheduler_skipped_over_cap", self.skipped_over_cap),
            (
                "scheduler_stopped_at_deadline",
                u32::from(self.stopped_at_deadline),
            ),
        ];
        let mut line = serde_json::Map::new();
        let mut defs = Vec::new();
        for (name, value) in counts {
            line.insert(name.into(), value.into());
            defs.push(serde_json::json!({"Name": name, "Unit": "Count"}));
        }
        defs.push(serde_json::json!({"Name": "scheduler_backlog_age_seconds", "Unit": "Seconds"}));
        line.insert(
            "scheduler_backlog_age_seconds".into(),
            self.backlog_age_secs.into(),
        );
        line.insert("function".into(), "scheduler".into());
        line.insert(
            "_aws".into(),
            serde_json::json!({
                "Timestamp": at.as_millis(),
                "CloudWatchMetrics": [{
                    "Namespace": namespace,
                    "Dimensions": [["function"]],
                    "Metrics": defs,
                }],
            }),
        );
        serde_json::Value::Object(line).to_string()
    }
}
