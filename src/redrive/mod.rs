//! Redrive (DESIGN §7): replay a bounded, filtered, audited selection of one channel's DLQ.
//!
//! Per matching message: move the ledger item `dead → ready` with an audit entry and a fresh
//! budget (a missing item stays `scheduled`; a `ready` item left by a crashed run is resent),
//! re-enqueue the same body with the same delivery key and a `redrive` marker, and only then
//! delete it from the DLQ. Already delivered → removed and counted as skipped, never resent.
//! Past `fresh_until` → counted as stale and left, unless the operator extends freshness.
//! Messages not taken are held invisible until the run ends (released earlier, the next
//! receive would return them again), and a run stops after a bounded number of messages.
//! Redriving the same batch twice sends nothing twice: the ledger decides.

pub mod request;

use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::clock::{Clock, Timestamp};
use crate::delivery::state::{Change, Ctx, RedriveAudit};
use crate::delivery::{transition, Written};
use crate::domain::{DeadReason, DeliveryMessage, RedriveMarker};
use crate::outbox::{self, Edit, Edited, Retention};
use crate::ports::{
    DeadLetterMessage, DeadLetters, DeliveryQueue, OutgoingMessage, PortError, Ports, ReminderStore,
};
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
    pub retention: Duration,
    pub deadline_margin: Duration,
}

impl Default for RedriveConfig {
    fn default() -> Self {
        Self {
            hold_secs: 900,
            retention: Duration::from_secs(15 * 24 * 3600),
            deadline_margin: Duration::from_secs(10),
        }
    }
}

enum One {
    Moved,
    Skipped,
    Stale,
    Failed,
}

pub struct Redriver<P: Ports> {
    ports: P,
    cfg: RedriveConfig,
    rng: Mutex<StdRng>,
}

impl<P: Ports> Redriver<P> {
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
        let clock = self.ports.clock();
        let seed = self
            .rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_u64();
        let mut summary = RedriveSummary {
            batch_id: format!("rd-{seed:016x}"),
            dry_run: req.dry_run,
            ..RedriveSummary::default()
        };
        // Bounded so that releasing what was held fits in the invocation, too.
        let max_seen = req.max_messages.saturating_mul(5).clamp(100, 2_000);
        let (mut seen, mut matched, mut empty_polls) = (0u32, 0u32, 0u32);
        let mut held: Vec<(DeadReason, String)> = Vec::new();
        let dlq = self.ports.dead_letters();
        let result = async {
            while matched < req.max_messages && seen < max_seen && empty_polls < 2 {
                if deadline.is_some_and(|d| clock.now().plus(self.cfg.deadline_margin) >= d) {
                    summary.stopped_at_deadline = true;
                    break;
                }
                let batch = dlq
                    .receive_dead(req.channel, 10, self.cfg.hold_secs)
                    .await?;
                empty_polls = if batch.is_empty() { empty_polls + 1 } else { 0 };
                for dm in batch {
                    seen += 1;
                    let reason = dm.letter.reason;
                    let counts = summary.by_reason.entry(reason).or_default();
                    counts.seen += 1;
                    if matched >= req.max_messages || !req.matches(&dm.letter) {
                        held.push((reason, dm.message.receipt_handle));
                        continue;
                    }
                    matched += 1;
                    counts.matched += 1;
                    if req.dry_run {
                        held.push((reason, dm.message.receipt_handle));
                        continue;
                    }
                    match self.redrive_one(req, &summary.batch_id, &dm).await {
                        One::Moved => {
                            counts.moved += 1;
                            let pause =
                                Duration::from_secs_f64(1.0 / f64::from(req.max_per_second));
                            clock.sleep(pause).await;
                        }
                        One::Skipped => counts.skipped += 1,
                        One::Stale => {
                            counts.stale += 1;
                            held.push((reason, dm.message.receipt_handle));
                        }
                        One::Failed => {
                            counts.failed += 1;
                            held.push((reason, dm.message.receipt_handle));
                        }
                    }
                }
            }
            Ok::<(), PortError>(())
        }
        .await;
        // Whatever happened, what was held becomes visible again.
        for (reason, receipt) in held {
            match dlq.release_dead(req.channel, &receipt).await {
                Ok(()) => summary.by_reason.entry(reason).or_default().released += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "release failed; visible again after the hold")
                }
            }
        }
        result?;
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
        Ok(summary)
    }

    async fn redrive_one(
        &self,
        req: &RedriveRequest,
        batch_id: &str,
        dm: &DeadLetterMessage,
    ) -> One {
        match self.try_redrive(req, batch_id, dm).await {
            Ok(one) => one,
            Err(e) => {
                tracing::warn!(error = %e, message_id = %dm.message.message_id, "redrive of one message failed; left in the DLQ");
                One::Failed
            }
        }
    }

    async fn try_redrive(
        &self,
        req: &RedriveRequest,
        batch_id: &str,
        dm: &DeadLetterMessage,
    ) -> Result<One, PortError> {
        let Ok(msg) = DeliveryMessage::decode(&dm.message.body) else {
            tracing::warn!(message_id = %dm.message.message_id, "undecodable message cannot be redriven");
            return Ok(One::Failed);
        };
        let now = self.ports.clock().now();
        let Some(reminder) = self.ports.reminders().get(&msg.reminder_id).await? else {
            tracing::warn!(delivery_key = %msg.delivery_key, "reminder is gone; nothing to redrive");
            return Ok(One::Failed);
        };
        let mut fresh_until = reminder.fresh_until;
        if now > fresh_until {
            let Some(extra) = req.extend_freshness_secs else {
                return Ok(One::Stale);
            };
            let changes = Edit {
                fresh_until: Some(now.plus(Duration::from_secs(extra))),
                ..Edit::default()
            };
            let retention = Retention(self.cfg.retention);
            match outbox::edit(self.ports.reminders(), &msg.reminder_id, changes, retention).await {
                Ok(Edited::Edited(r)) => fresh_until = r.fresh_until,
                Ok(_) => return Ok(One::Stale),
                Err(outbox::OutboxError::Port(e)) => return Err(e),
                Err(_) => return Ok(One::Failed),
            }
        }
        let ctx = Ctx {
            key: msg.delivery_key.clone(),
            now,
            expires_at: fresh_until.plus(self.cfg.retention).as_epoch_seconds_ceil(),
        };
        let audit = RedriveAudit {
            batch_id: batch_id.to_owned(),
            operator: req.operator.clone(),
            note: req.note.clone(),
        };
        let dlq = self.ports.dead_letters();
        match transition(self.ports.ledger(), None, Change::Redrive { audit }, &ctx).await? {
            Written::Applied(_) => {}
            // No item: still `scheduled`. Ready (a crashed run), sending or deferred: the
            // ledger guards the resend.
            Written::Refused { current: None, .. } => {}
            Written::Refused {
                current: Some(r), ..
            } if r.status().is_terminal() => {
                dlq.delete_dead(req.channel, &dm.message.receipt_handle)
                    .await?;
                return Ok(One::Skipped);
            }
            Written::Refused { .. } => {}
        }
        let mut copy = msg;
        copy.not_before = None;
        copy.redrive = Some(RedriveMarker {
            batch_id: batch_id.to_owned(),
            operator: req.operator.clone(),
            at: now,
        });
        let entry = OutgoingMessage {
            entry_id: "0".into(),
            body: copy.encode(),
            delay_secs: 0,
        };
        let failed = self.ports.queue().send_batch(req.channel, &[entry]).await?;
        if let Some(f) = failed.first() {
            return Err(PortError::Unavailable {
                op: "redrive.enqueue",
                message: f.code.clone(),
            });
        }
        // Only after the re-enqueue succeeded. A crash here leaves a duplicate in the DLQ,
        // which the ledger makes harmless.
        dlq.delete_dead(req.channel, &dm.message.receipt_handle)
            .await?;
        tracing::info!(delivery_key = %copy.delivery_key, batch_id, operator = %req.operator, "redriven");
        Ok(One::Moved)
    }
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
