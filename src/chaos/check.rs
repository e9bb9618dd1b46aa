//! The verdict on a settled world, per delivery key of every reminder's final channels.

use std::collections::BTreeMap;

use super::world::World;
use super::{SeedReport, Tally};
use crate::clock::Timestamp;
use crate::delivery::state::{DeliveryRecord, Status};
use crate::domain::{DeadReason, DeliveryKey, DeliveryMessage, ReminderStatus};
use crate::ports::ReminderStore;

pub(super) async fn judge(world: &World, seed: u64) -> SeedReport {
    let ledger: BTreeMap<DeliveryKey, DeliveryRecord> = world
        .ledger
        .snapshot()
        .into_iter()
        .map(|r| (r.key().clone(), r))
        .collect();
    let copies = dlq_copies(world);
    let facts = world.journal.facts();
    let mut report = SeedReport {
        seed,
        tally: Tally {
            seeds: 1,
            faults_injected: world.dice.injected(),
            ..Tally::default()
        },
        findings: Vec::new(),
    };
    let max_attempts = world.consumer_cfg.policy.max_attempts;
    for id in &world.ids {
        let Ok(Some(r)) = world.store.get(id).await else {
            report.broken(|t| &mut t.lost, format!("reminder {id} is gone"));
            continue;
        };
        for channel in r.channels() {
            let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
            let rec = ledger.get(&key);
            let reasons = copies.get(&key).cloned().unwrap_or_default();
            let f = facts.get(&key).cloned().unwrap_or_default();
            let status = rec.map(DeliveryRecord::status);
            let current = rec.and_then(DeliveryRecord::dead_at);
            let c = classify(&reasons, &f.deaths, current);
            let t = &mut report.tally;
            t.deliveries += 1;
            t.duplicate_copies += c.duplicates;
            t.stale_copies += c.stale;
            let history: Vec<String> = rec
                .map(|rec| {
                    rec.history()
                        .into_iter()
                        .map(|(n, h)| {
                            let detail = h.detail.as_deref().unwrap_or("");
                            format!("{n}:{}->{} {detail}", h.from.as_str(), h.to.as_str())
                        })
                        .collect()
                })
                .unwrap_or_default();
            let what = format!(
                "{key} ({channel}, idempotent {}): ledger {status:?} [{}], reminder {:?}, DLQ copies {reasons:?}, {f:?}",
                world.shape.idempotent.get(channel),
                history.join(", "),
                r.status
            );
            let settled = match status {
                Some(Status::Delivered | Status::Expired | Status::Cancelled) => true,
                Some(Status::Dead) => {
                    if !c.current {
                        report.broken(|t| &mut t.dead_without_copy, what.clone());
                    }
                    true
                }
                None if matches!(
                    r.status,
                    ReminderStatus::Cancelled | ReminderStatus::Expired
                ) =>
                {
                    true
                }
                _ => !reasons.is_empty(),
            };
            if !settled {
                report.broken(|t| &mut t.lost, what.clone());
            }
            if c.extra > 0 {
                report.tally.extra_dlq_copies += c.extra;
                report
                    .findings
                    .push(format!("DLQ copies of no death the ledger saw: {what}"));
            }
            let idempotent = *world.shape.idempotent.get(channel);
            let twice = !idempotent && f.acceptances > 1;
            if f.sends_after_delivered > 0 || (twice && !f.redriven_ambiguous) {
                report.broken(|t| &mut t.duplicated, what.clone());
            }
            let dead_ambiguous = rec.and_then(DeliveryRecord::dead_reason)
                == Some(DeadReason::Ambiguous)
                && status == Some(Status::Dead);
            if dead_ambiguous || (twice && f.redriven_ambiguous) {
                report.tally.flagged_ambiguous += 1;
            }
            for (n, field, label) in [
                (f.stale_sends, 0, "sent after fresh_until"),
                (f.early_sends, 1, "sent before its Retry-After"),
                (f.sends_after_cancel, 2, "sent after its cancel"),
            ] {
                if n > 0 {
                    let what = format!("{label}: {what}");
                    report.broken(
                        |t| match field {
                            0 => &mut t.stale_sends,
                            1 => &mut t.early_sends,
                            _ => &mut t.sends_after_cancel,
                        },
                        what,
                    );
                }
            }
            if f.attempts > max_attempts * (1 + f.redrives) {
                report.broken(|t| &mut t.budget_exceeded, what.clone());
            }
        }
    }
    report
}

/// DLQ copies per delivery key: the death each states (`dead_at`, none for a message the
/// queue's redrive policy moved), read without receiving.
fn dlq_copies(world: &World) -> BTreeMap<DeliveryKey, Vec<Copy>> {
    let mut copies: BTreeMap<DeliveryKey, Vec<Copy>> = BTreeMap::new();
    for channel in crate::domain::Channel::ALL {
        for (body, letter) in world.dlq.peek_letters(channel) {
            if let Ok(msg) = DeliveryMessage::decode(&body) {
                copies.entry(msg.delivery_key).or_default().push(Copy {
                    reason: letter.reason,
                    dead_at: letter.evidence.map(|e| e.dead_at),
                });
            }
        }
    }
    copies
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Copy {
    reason: DeadReason,
    dead_at: Option<Timestamp>,
}

/// What a key's DLQ copies say, against the deaths the ledger saw.
struct Copies {
    /// A copy states the current death (or the ledger no longer knows when that was).
    current: bool,
    /// Distinct copies stating a death the ledger never had.
    extra: u64,
    /// Copies of an earlier death, since redriven (a redrive run stopped between re-enqueue
    /// and delete; later runs skip them).
    stale: u64,
    /// Second copies of one death.
    duplicates: u64,
}

fn classify(copies: &[Copy], deaths: &[Timestamp], current: Option<Timestamp>) -> Copies {
    let made: Vec<&Copy> = copies.iter().filter(|c| c.dead_at.is_some()).collect();
    let distinct: std::collections::BTreeSet<Option<Timestamp>> =
        made.iter().map(|c| c.dead_at).collect();
    let seen = |at: &Option<Timestamp>| at.is_some_and(|at| deaths.contains(&at));
    Copies {
        current: current.is_none_or(|now| distinct.contains(&Some(now))),
        extra: distinct.iter().filter(|at| !seen(at)).count() as u64,
        stale: distinct
            .iter()
            .filter(|at| seen(at) && **at != current)
            .count() as u64,
        duplicates: (made.len() - distinct.len()) as u64,
    }
}

impl SeedReport {
    fn broken(&mut self, counter: impl FnOnce(&mut Tally) -> &mut u64, what: String) {
        *counter(&mut self.tally) += 1;
        self.findings.push(what);
    }
}
