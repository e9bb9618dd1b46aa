//! Redrive (docs/design.md, "Dead letters and redrive"): replay a bounded, filtered, audited
//! selection of one channel's DLQ.
//!
//! Per matching message: move the ledger item `dead → ready` with an audit entry and a fresh
//! budget (a missing item stays `scheduled`; a `ready` item left by a crashed run is resent),
//! re-enqueue the same body with the same delivery key and a `redrive` marker, and only then
//! delete it from the DLQ. Already delivered → removed and counted as skipped, never resent.
//! Past `fresh_until` → counted as stale and left, unless the operator extends freshness.
//! A cancelled reminder, or an occurrence its series no longer makes (docs/design.md, "Recurring
//! series": an acknowledged edit or cancel ends it for good) → cancelled, removed and counted as
//! skipped. Messages not taken are held invisible until the run ends (released earlier, the next
//! receive would return them again), and a run stops after a bounded number of messages.
//! Redriving the same batch twice sends nothing twice: the ledger decides.

mod one;
pub mod request;
mod series;

use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::clock::{Clock, Timestamp};
use crate::config::{ConfigError, Vars};
use crate::domain::retention::{Retention, RETENTION_VAR};
use crate::domain::DeadReason;
use crate::ports::{DeadLetterMessage, DeadLetters, PortError, Ports};
pub use request::{Counts, RedriveRequest, RedriveSummary, RequestError};

#[derive(Debug, thiserror::Error)]
pub enum RedriveError {
    #[error("invalid redrive request: {0}")]
    Invalid(#[from] RequestError),
    #[error(transparent)]
    Port(#[from] PortError),
}

#[derive(Debug, Clone)]
pub struct RedriveConfig {
    /// How long messages stay held (invisible) if a run dies before releasing them.
    pub hold_secs: u32,
    /// Of the ledger items it writes, and of a reminder whose freshness it extends.
    pub retention: Retention,
    pub deadline_margin: Duration,
}

/// Every variable [`RedriveConfig`] reads.
pub const VARS: [&str; 1] = [RETENTION_VAR];

impl Default for RedriveConfig {
    fn default() -> Self {
        Self {
            hold_secs: 900,
            retention: Retention::default(),
            deadline_margin: Duration::from_secs(10),
        }
    }
}

impl RedriveConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(crate::config::env)
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Self {
            retention: Retention::from_vars(&Vars::new(get))?,
            ..Self::default()
        })
    }
}

enum One {
    Moved,
    Skipped,
    Stale,
    Refused,
    Failed,
}

pub struct Redriver<P: Ports> {
    ports: P,
    cfg: RedriveConfig,
    rng: Mutex<StdRng>,
}

impl<P: Ports> Redriver<P>
where
    P::Reminders: crate::ports::SeriesStore,
{
    pub fn new(ports: P, cfg: RedriveConfig, seed: u64) -> Self {
        Self {
            ports,
            cfg,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    pub fn ports(&self) -> &P {
        &self.ports
    }

    pub async fn run(
        &self,
        req: &RedriveRequest,
        deadline: Option<Timestamp>,
    ) -> Result<RedriveSummary, RedriveError> {
        req.validate()?;
        let seed = self
            .rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_u64();
        let mut sweep = Sweep {
            summary: RedriveSummary {
                batch_id: format!("rd-{seed:016x}"),
                dry_run: req.dry_run,
                ..RedriveSummary::default()
            },
            seen: 0,
            matched: 0,
            empty_polls: 0,
            held: Vec::new(),
        };
        let result = self.sweep(req, deadline, &mut sweep).await;
        // Whatever happened, what was held becomes visible again.
        self.release_held(req, &mut sweep).await;
        result?;
        log_run(req, &sweep.summary);
        Ok(sweep.summary)
    }

    /// Receive and take messages until the request's bounds, the DLQ's end or the deadline.
    async fn sweep(
        &self,
        req: &RedriveRequest,
        deadline: Option<Timestamp>,
        s: &mut Sweep,
    ) -> Result<(), PortError> {
        let clock = self.ports.clock();
        // Bounded so that releasing what was held fits in the invocation, too.
        let max_seen = req.max_messages.saturating_mul(5).clamp(100, 2_000);
        while s.matched < req.max_messages && s.seen < max_seen && s.empty_polls < 2 {
            if deadline.is_some_and(|d| clock.now().plus(self.cfg.deadline_margin) >= d) {
                s.summary.stopped_at_deadline = true;
                break;
            }
            let batch = self
                .ports
                .dead_letters()
                .receive_dead(req.channel, 10, self.cfg.hold_secs)
                .await?;
            s.empty_polls = if batch.is_empty() {
                s.empty_polls + 1
            } else {
                0
            };
            for dm in batch {
                self.take(req, s, dm).await;
            }
        }
        Ok(())
    }

    /// One received message: held if it does not match (or on a dry run), else redriven.
    async fn take(&self, req: &RedriveRequest, s: &mut Sweep, dm: DeadLetterMessage) {
        s.seen += 1;
        let reason = dm.letter.reason;
        s.summary.by_reason.entry(reason).or_default().seen += 1;
        if s.matched >= req.max_messages || !req.matches(&dm.letter) {
            s.held.push((reason, dm.message.receipt_handle));
            return;
        }
        s.matched += 1;
        s.summary.by_reason.entry(reason).or_default().matched += 1;
        if req.dry_run {
            s.held.push((reason, dm.message.receipt_handle));
            return;
        }
        let one = self.redrive_one(req, &s.summary.batch_id, &dm).await;
        let counts = s.summary.by_reason.entry(reason).or_default();
        match one {
            One::Moved => {
                counts.moved += 1;
                let pause = Duration::from_secs_f64(1.0 / f64::from(req.max_per_second));
                self.ports.clock().sleep(pause).await;
            }
            One::Skipped => counts.skipped += 1,
            One::Stale => {
                counts.stale += 1;
                s.held.push((reason, dm.message.receipt_handle));
            }
            One::Refused => {
                counts.refused += 1;
                s.held.push((reason, dm.message.receipt_handle));
            }
            One::Failed => {
                counts.failed += 1;
                s.held.push((reason, dm.message.receipt_handle));
            }
        }
    }

    async fn release_held(&self, req: &RedriveRequest, s: &mut Sweep) {
        let dlq = self.ports.dead_letters();
        for (reason, receipt) in s.held.drain(..) {
            match dlq.release_dead(req.channel, &receipt).await {
                Ok(()) => s.summary.by_reason.entry(reason).or_default().released += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "release failed; visible again after the hold")
                }
            }
        }
    }
}

/// One run's bookkeeping.
struct Sweep {
    summary: RedriveSummary,
    seen: u32,
    matched: u32,
    empty_polls: u32,
    /// Receipt handles held invisible until the run ends.
    held: Vec<(DeadReason, String)>,
}

fn log_run(req: &RedriveRequest, summary: &RedriveSummary) {
    let total = summary.total();
    tracing::info!(
        batch_id = %summary.batch_id,
        operator = %req.operator,
        dry_run = req.dry_run,
        seen = total.seen,
        matched = total.matched,
        moved = total.moved,
        skipped = total.skipped,
        stale = total.stale,
        failed = total.failed,
        "redrive run"
    );
}

/// Read up to `max` messages of a channel's DLQ without moving them: each is held while the
/// read goes on (so it is seen once) and released at the end. For summaries and inspection.
pub async fn peek<D: DeadLetters>(
    dlq: &D,
    channel: crate::domain::Channel,
    max: u32,
    hold_secs: u32,
) -> Result<Vec<DeadLetterMessage>, PortError> {
    let mut seen: Vec<DeadLetterMessage> = Vec::new();
    let mut empty_polls = 0;
    let read = async {
        while (seen.len() as u32) < max && empty_polls < 2 {
            let batch = dlq.receive_dead(channel, 10, hold_secs).await?;
            empty_polls = if batch.is_empty() { empty_polls + 1 } else { 0 };
            seen.extend(batch);
        }
        Ok::<(), PortError>(())
    }
    .await;
    for m in &seen {
        if let Err(e) = dlq.release_dead(channel, &m.message.receipt_handle).await {
            tracing::warn!(error = %e, "release failed; visible again after the hold");
        }
    }
    read.map(|()| seen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deadletter::{DeadLetter, Evidence};

    fn req(json: &str) -> Result<RedriveRequest, String> {
        let r: RedriveRequest = serde_json::from_str(json).map_err(|e| e.to_string())?;
        r.validate().map_err(|e| e.to_string())?;
        Ok(r)
    }

    #[test]
    fn requests_are_bounded_filtered_and_attributed() {
        let ok =
            req(r#"{"channel":"sms","reasons":["rejected"],"max_messages":5,"operator":"ana"}"#)
                .unwrap();
        assert!(ok.dry_run, "dry run by default");
        assert_eq!(ok.max_per_second, 10);
        for (bad, why) in [
            (
                r#"{"channel":"sms","reasons":[],"max_messages":5,"operator":"a"}"#,
                "reason",
            ),
            (
                r#"{"channel":"sms","reasons":["rejected"],"operator":"a"}"#,
                "max_messages",
            ),
            (
                r#"{"channel":"sms","reasons":["rejected"],"max_messages":0,"operator":"a"}"#,
                "max_messages",
            ),
            (
                r#"{"channel":"sms","reasons":["rejected"],"max_messages":5,"operator":" "}"#,
                "operator",
            ),
            (
                r#"{"channel":"sms","reasons":["bogus"],"max_messages":5,"operator":"a"}"#,
                "bogus",
            ),
            (
                r#"{"channel":"sms","reasons":["rejected"],"max_messages":5,"operator":"a","typo":1}"#,
                "typo",
            ),
        ] {
            let err = req(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn time_filters_need_evidence() {
        let mut r = req(r#"{"channel":"sms","reasons":["rejected","receive_count_exceeded"],"max_messages":5,"operator":"a"}"#).unwrap();
        let with = DeadLetter::new(
            DeadReason::Rejected,
            Evidence {
                attempts: 1,
                first_seen_at: Some(Timestamp::from_millis(100)),
                dead_at: Timestamp::from_millis(200),
                last_error: None,
                policy_version: None,
                source_queue: "q".into(),
            },
        );
        let without = DeadLetter {
            reason: DeadReason::ReceiveCountExceeded,
            evidence: None,
        };
        assert!(r.matches(&with) && r.matches(&without));
        r.dead_after = Some(Timestamp::from_millis(150));
        assert!(r.matches(&with) && !r.matches(&without));
        r.dead_before = Some(Timestamp::from_millis(200));
        assert!(!r.matches(&with), "before is exclusive");
        r.reasons.remove(&DeadReason::Rejected);
        r.dead_after = None;
        r.dead_before = None;
        assert!(!r.matches(&with));
    }
}
