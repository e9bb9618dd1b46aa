//! What a batch did, as counters, and as CloudWatch Embedded Metric Format lines (docs/design.md,
//! "Observability"): metrics from log lines, no extra API call. With partial batch responses a
//! failing record does not fail the invocation, so these — not the function's Errors metric — feed
//! alarms.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::clock::Timestamp;
use crate::domain::{Channel, DeadReason};

/// The EMF metrics' namespace when `METRICS_NAMESPACE` is not set. The template sets
/// `Reminders/<stack name>`, so two stacks in one account never share a metric or an alarm.
pub const NAMESPACE: &str = "Reminders";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    pub delivered: u32,
    /// Deferred by the local provider gate, without calling the provider.
    pub deferred_gate: u32,
    /// Deferred after the provider throttled.
    pub deferred_provider: u32,
    /// Held because the provider partition's breaker is open (no call, no attempt spent).
    pub held_breaker: u32,
    /// Held inside the recipient's quiet hours (no call, no attempt spent).
    pub held_quiet_hours: u32,
    /// Addresses a provider declared dead, suppressed by this batch.
    pub suppressions_recorded: u32,
    /// Messages of channels in standby whose turn never came (acknowledged, nothing sent).
    pub standby: u32,
    /// Messages of channels in standby held while the channel ahead settles.
    pub standby_held: u32,
    /// Deaths that started a delivery on the subscriber's fallback channel.
    pub fallbacks: u32,
    /// Breaker probes won (each one provider call while the partition is open).
    pub breaker_probes: u32,
    /// Partitions this batch opened (or reopened after a failed probe).
    pub breaker_opened: u32,
    /// The longest a breaker seen by this batch has been open, in seconds (0: none open).
    pub breaker_open_secs: u64,
    /// Retried after a transient or ambiguous failure.
    pub retried: u32,
    /// Waits handed to a fresh copy (too long for visibility, or near maxReceiveCount).
    pub reenqueued: u32,
    pub dead: BTreeMap<DeadReason, u32>,
    pub expired: u32,
    pub cancelled: u32,
    pub duplicates_suppressed: u32,
    /// The provider accepted after this worker's lease was taken over (reconcile these).
    pub delivered_after_takeover: u32,
    /// DynamoDB or SQS failed: the record is retried through its queue.
    pub infra_errors: u32,
    /// The code broke its own invariant (a bug): retried through the queue, alarmed apart.
    pub invariant_errors: u32,
    pub panics: u32,
    /// Not started before the invocation deadline: made visible again.
    pub released: u32,
    /// Ledger items in a status this version does not know (a newer writer's): left as they
    /// are, their messages held for later.
    pub newer_status: u32,
    /// Sole messages claimed first and read in one request (the one-read path).
    pub one_read: u32,
    /// Of those, claims given back (nothing spent) because the reminder as read was not what
    /// the message said (edited, cancelled, gone, another address): they went the two-read way.
    pub one_read_released: u32,
    /// delivered_at − due_at, per delivery.
    pub lateness_ms: Vec<i64>,
    /// Provider attempts of each delivered delivery.
    pub attempts: Vec<u32>,
}

impl Metrics {
    pub fn dead(&mut self, reason: DeadReason) {
        *self.dead.entry(reason).or_default() += 1;
    }

    pub fn dead_total(&self) -> u32 {
        self.dead.values().sum()
    }

    /// Deaths that need an operator (the EMF `dead_total`): a recipient's choice (opted out,
    /// suppressed, quiet hours outlasting freshness) is counted under its own reason only, so
    /// the `<Channel>DeadDeliveries` alarm never pages for it.
    pub fn dead_needing_operator(&self) -> u32 {
        self.dead
            .iter()
            .filter(|(r, _)| !r.is_recipients_choice())
            .map(|(_, n)| n)
            .sum()
    }

    pub fn merge(&mut self, other: Metrics) {
        self.delivered += other.delivered;
        self.deferred_gate += other.deferred_gate;
        self.deferred_provider += other.deferred_provider;
        self.held_breaker += other.held_breaker;
        self.held_quiet_hours += other.held_quiet_hours;
        self.suppressions_recorded += other.suppressions_recorded;
        self.standby += other.standby;
        self.standby_held += other.standby_held;
        self.fallbacks += other.fallbacks;
        self.breaker_probes += other.breaker_probes;
        self.breaker_opened += other.breaker_opened;
        self.breaker_open_secs = self.breaker_open_secs.max(other.breaker_open_secs);
        self.retried += other.retried;
        self.reenqueued += other.reenqueued;
        for (reason, n) in other.dead {
            *self.dead.entry(reason).or_default() += n;
        }
        self.expired += other.expired;
        self.cancelled += other.cancelled;
        self.duplicates_suppressed += other.duplicates_suppressed;
        self.delivered_after_takeover += other.delivered_after_takeover;
        self.infra_errors += other.infra_errors;
        self.invariant_errors += other.invariant_errors;
        self.panics += other.panics;
        self.released += other.released;
        self.newer_status += other.newer_status;
        self.one_read += other.one_read;
        self.one_read_released += other.one_read_released;
        self.lateness_ms.extend(other.lateness_ms);
        self.attempts.extend(other.attempts);
    }

    /// One EMF line for one channel's batch, in `namespace`.
    pub fn emf(&self, channel: Channel, at: Timestamp, namespace: &str) -> String {
        let mut values = Map::new();
        let mut defs = Vec::new();
        let mut count = |name: String, v: u32| {
            defs.push(json!({"Name": name, "Unit": "Count"}));
            values.insert(name, json!(v));
        };
        count("delivered".into(), self.delivered);
        count("deferred_gate".into(), self.deferred_gate);
        count("deferred_provider".into(), self.deferred_provider);
        count("held_breaker".into(), self.held_breaker);
        count("breaker_probes".into(), self.breaker_probes);
        count("held_quiet_hours".into(), self.held_quiet_hours);
        count("suppressions_recorded".into(), self.suppressions_recorded);
        count("standby".into(), self.standby);
        count("standby_held".into(), self.standby_held);
        count("fallbacks".into(), self.fallbacks);
        count("breaker_opened".into(), self.breaker_opened);
        count("retried".into(), self.retried);
        count("reenqueued".into(), self.reenqueued);
        count("expired".into(), self.expired);
        count("cancelled".into(), self.cancelled);
        count("duplicates_suppressed".into(), self.duplicates_suppressed);
        count(
            "delivered_after_takeover".into(),
            self.delivered_after_takeover,
        );
        count("infra_errors".into(), self.infra_errors);
        // Panics are bugs too: they page whoever owns the code, not the platform.
        count(
            "invariant_errors".into(),
            self.invariant_errors + self.panics,
        );
        count("released".into(), self.released);
        count("newer_status".into(), self.newer_status);
        count("one_read".into(), self.one_read);
        count("one_read_released".into(), self.one_read_released);
        count("dead_total".into(), self.dead_needing_operator());
        for reason in DeadReason::ALL {
            count(
                format!("dead_{reason}"),
                self.dead.get(&reason).copied().unwrap_or(0),
            );
        }
        // Its Maximum feeds the "open too long" alarm.
        defs.push(json!({"Name": "breaker_open_seconds", "Unit": "Seconds"}));
        values.insert("breaker_open_seconds".into(), json!(self.breaker_open_secs));
        if !self.lateness_ms.is_empty() {
            defs.push(json!({"Name": "lateness_ms", "Unit": "Milliseconds"}));
            values.insert("lateness_ms".into(), json!(self.lateness_ms));
        }
        if !self.attempts.is_empty() {
            defs.push(json!({"Name": "attempts", "Unit": "Count"}));
            values.insert("attempts".into(), json!(self.attempts));
        }
        values.insert("channel".into(), json!(channel.as_str()));
        values.insert(
            "_aws".into(),
            json!({
                "Timestamp": at.as_millis(),
                "CloudWatchMetrics": [{
                    "Namespace": namespace,
                    "Dimensions": [["channel"]],
                    "Metrics": defs,
                }],
            }),
        );
        Value::Object(values).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_line_declares_every_value_it_carries() {
        let mut m = Metrics {
            delivered: 2,
            lateness_ms: vec![10, 20],
            ..Metrics::default()
        };
        m.dead(DeadReason::Rejected);
        let line: Value =
            serde_json::from_str(&m.emf(Channel::Sms, Timestamp::from_millis(5), NAMESPACE))
                .unwrap();
        assert_eq!(line["delivered"], 2);
        assert_eq!(line["dead_rejected"], 1);
        assert_eq!(line["channel"], "sms");
        assert_eq!(line["lateness_ms"], json!([10, 20]));
        let declared: Vec<&str> = line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["Name"].as_str().unwrap())
            .collect();
        for name in &declared {
            assert!(line.get(name).is_some(), "{name} declared but absent");
        }
        assert!(declared.contains(&"dead_receive_count_exceeded"));
    }
}
