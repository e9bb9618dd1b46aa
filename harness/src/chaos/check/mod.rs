//! The verdict on a settled world, per delivery key of every reminder's final channels.

use std::collections::BTreeMap;

use super::copies::{dlq_copies, Copy};
use super::journal::{KeyFacts, PrefsWrite};
use super::verdicts::{Seen, Unsettled};

mod sends;
use super::world::World;
use super::{SeedReport, Tally};
use reminders_core::clock::{Clock, Timestamp};
use reminders_core::domain::{Channel, DeadReason, DeliveryKey, Reminder, ReminderStatus};
use reminders_core::ledger::{DeliveryRecord, Status};
use reminders_core::ports::ReminderStore;

/// Which tally field a broken promise goes to.
type Counter = fn(&mut Tally) -> &mut u64;

/// One delivery key as the world left it.
struct Verdict<'a> {
    reminder: &'a Reminder,
    rec: Option<&'a DeliveryRecord>,
    copies: &'a [Copy],
    facts: &'a KeyFacts,
    channel: Channel,
    /// The subscriber's preference writes, oldest first.
    prefs: &'a [PrefsWrite],
    idempotent: bool,
    /// The operator asked to cancel this reminder at some point.
    cancel_requested: bool,
    max_attempts: u32,
    max_receive_count: u32,
    /// The earliest `fresh_until` any version of the reminder had.
    first_fresh_until: Timestamp,
    /// If it did not settle, why.
    unsettled: Unsettled,
    /// `acknowledged_change_ignored` fired for it: not judged lost or stranded too.
    ignored: bool,
    /// A provider answered 410 for its address (on any reminder of the subscriber).
    gone: bool,
    /// A version of the reminder that landed did not list the channel.
    edited_away: bool,
    /// Its death handed on (`fallback_to`), or another channel of the reminder delivered.
    served_elsewhere: bool,
    /// A breaker's opening cut the reminder's freshness short (almost-stale probes).
    cut_short: bool,
    what: String,
}

pub(super) async fn judge(world: &World) -> SeedReport {
    let seed = world.seed.0;
    let ledger: BTreeMap<DeliveryKey, DeliveryRecord> = world
        .ledger
        .snapshot()
        .into_iter()
        .map(|r| (r.key().clone(), r))
        .collect();
    let copies = dlq_copies(world);
    let facts = world.journal.facts();
    let prefs = world.journal.preference_writes();
    let cancels = reminders_core::sync::lock(&world.cancel_requests).clone();
    let mut report = SeedReport {
        seed,
        tally: Tally {
            seeds: 1,
            faults_injected: world.dice.injected(),
            writes_retried: world.dice.writes_retried(),
            made_evicted: world.dice.made_evicted(),
            preference_changes: prefs.values().map(|w| w.len() as u64).sum(),
            ..Tally::default()
        },
        findings: Vec::new(),
    };
    let invalid = reminders_core::sync::lock(&world.invalid_ids).clone();
    for id in &invalid {
        let status = world.store.get(id).await.ok().flatten().map(|r| r.status);
        if status != Some(ReminderStatus::Invalid) {
            let what = format!("invalid item {id} never quarantined: {status:?}");
            report.broken(|t| &mut t.lost, what);
        }
    }
    super::verdicts::world_wide(world, &mut report);
    // Made `ready` by a redrive whose re-enqueue did not happen, the copy of the last death
    // still in the DLQ (its alarm counts it; the next redrive resends it).
    let awaiting_redrive = ledger
        .iter()
        .filter(|(_, rec)| rec.status() == Status::Ready)
        .filter(|(key, _)| {
            let last = facts.get(*key).and_then(|f| f.deaths.last().copied());
            let copies = copies.get(*key).map_or(&[][..], Vec::as_slice);
            last.is_some() && copies.iter().any(|c| c.dead_at == last)
        })
        .map(|(key, _)| key.clone())
        .collect();
    let seen = Seen {
        world,
        ledger: &ledger,
        facts: &facts,
        prefs: &prefs,
        now: world.clock.now(),
        awaiting_redrive,
    };
    let occurrences = super::occurrences::occurrences(world).await;
    report.tally.occurrences_made += occurrences.len() as u64;
    super::occurrences::judge(world, &mut report).await;
    super::erasure::judge(world, &mut report).await;
    for id in world.ids.iter().chain(&occurrences) {
        let Ok(Some(r)) = world.store.get(id).await else {
            report.broken(|t| &mut t.lost, format!("reminder {id} is gone"));
            continue;
        };
        if world.ports.reminders.hook.ttl_gone(&r) {
            report.tally.reminder_ttl_passed += 1;
        }
        seen.expired_while_fresh(&r, &mut report);
        seen.two_channels_sent(&r, &mut report);
        let ignored = seen.acknowledged_change_ignored(&r, &mut report);
        let landed = world.acks.landed_versions(id);
        let first_fresh_until = landed
            .iter()
            .map(|l| l.fresh_until)
            .min()
            .unwrap_or(r.fresh_until)
            .min(r.fresh_until);
        for channel in r.channels() {
            let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
            let rec = ledger.get(&key);
            let copies = copies.get(&key).map_or(&[][..], Vec::as_slice);
            let none = KeyFacts::default();
            let f = facts.get(&key).unwrap_or(&none);
            let idempotent = *world.shape.idempotent.get(channel);
            let v = Verdict {
                reminder: &r,
                rec,
                copies,
                facts: f,
                channel,
                prefs: prefs.get(&r.subscriber_id).map_or(&[][..], Vec::as_slice),
                idempotent,
                cancel_requested: cancels.contains(&r.reminder_id),
                max_attempts: world.consumer_cfg.policy.max_attempts,
                max_receive_count: world.shape.max_receive_count,
                first_fresh_until,
                unsettled: seen.unsettled(&r, channel),
                ignored: ignored.contains(&key),
                gone: world.journal.was_gone(&r.subscriber_id, channel),
                edited_away: landed.iter().any(|l| !l.channels.contains(&channel)),
                served_elsewhere: rec.is_some_and(|r| r.fallback_to().is_some())
                    || Channel::ALL.into_iter().filter(|c| *c != channel).any(|c| {
                        let k = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, c);
                        ledger.get(&k).map(DeliveryRecord::status) == Some(Status::Delivered)
                    }),
                cut_short: world.counts.cut_short(&r.reminder_id),
                what: describe(&key, channel, idempotent, rec, &r, copies, f),
            };
            v.judge(&mut report);
        }
    }
    if let Some(newer) = &world.newer {
        let (marked, lost) = newer.dropped(&world.ledger).await;
        report.tally.newer_marks += marked;
        for what in lost {
            report.broken(|t| &mut t.newer_attribute_dropped, what);
        }
    }
    // Last: the lists' items are written only now, so that no verdict above reads them.
    super::cursors::judge(world, &mut report).await;
    report
}

impl Verdict<'_> {
    fn status(&self) -> Option<Status> {
        self.rec.map(DeliveryRecord::status)
    }

    /// When the ledger recorded the expiry, by the world's clock.
    fn expired_at(&self) -> Option<Timestamp> {
        let rec = self.rec.filter(|r| r.status() == Status::Expired)?;
        // The entry that moved it to expired (an edit's horizon move is expired → expired).
        let history = rec.history();
        let (_, entry) = history
            .iter()
            .rev()
            .find(|(_, h)| h.to == Status::Expired && h.from != Status::Expired)?;
        Some(entry.at)
    }

    fn copy_of_last_death(&self) -> bool {
        let last = self.facts.deaths.last().copied();
        last.is_some() && self.copies.iter().any(|c| c.dead_at == last)
    }

    fn judge(&self, report: &mut SeedReport) {
        report.tally.deliveries += 1;
        self.ending(report);
        self.dlq(report);
        self.sends(report);
    }

    /// Settled, and for a reason the world gave.
    fn ending(&self, report: &mut SeedReport) {
        let mut unexplained = false;
        let t = &mut report.tally;
        let reminder_status = self.reminder.status;
        let settled = match self.status() {
            Some(Status::Delivered) => {
                t.delivered += 1;
                t.cut_short_delivered += u64::from(self.cut_short);
                true
            }
            Some(Status::Expired) => {
                t.expired += 1;
                t.cut_short_expired += u64::from(self.cut_short);
                true
            }
            Some(Status::Cancelled) => {
                t.cancelled += 1;
                true
            }
            Some(Status::Dead) => {
                t.dead += 1;
                match self.rec.and_then(DeliveryRecord::dead_reason) {
                    Some(DeadReason::OptedOut) => t.opted_out += 1,
                    Some(DeadReason::ExpiredQuietHours) => t.expired_quiet_hours += 1,
                    Some(DeadReason::Suppressed) => t.suppressed += 1,
                    Some(DeadReason::CountryNotAllowed) => t.country_not_allowed += 1,
                    _ => {}
                }
                true
            }
            None if reminder_status == ReminderStatus::Cancelled => {
                t.cancelled += 1;
                true
            }
            None if reminder_status == ReminderStatus::Expired => {
                t.expired += 1;
                t.cut_short_expired += u64::from(self.cut_short);
                true
            }
            // Not final on the ledger: settled only if its own message reached the DLQ through
            // the queue's redrive policy (a crash loop), never by a stale copy of an earlier
            // death.
            _ if self.copies.iter().any(|c| c.dead_at.is_none()) => {
                t.dead += 1;
                // Judged, not taken on trust: the queue moves a message only past its
                // receive count.
                unexplained = self.facts.receives < self.max_receive_count;
                true
            }
            // Made `ready` by a redrive run that stopped before its re-enqueue: the copy of its
            // last death is still in the DLQ, and the next redrive of that reason resends it.
            Some(Status::Ready) if self.copy_of_last_death() => {
                t.dead += 1;
                t.awaiting_redrive += 1;
                true
            }
            _ => false,
        };
        if !settled && !self.ignored {
            match self.unsettled {
                Unsettled::Waiting => {}
                Unsettled::NotNeeded => report.tally.not_needed += 1,
                Unsettled::Stranded { alarmed: true } => report.tally.stranded_alarmed += 1,
                Unsettled::Stranded { alarmed: false } => {
                    let what = format!("stranded in standby: {}", self.what);
                    report.broken(|t| &mut t.stranded, what);
                }
                Unsettled::Lost => report.broken(|t| &mut t.lost, self.what.clone()),
            }
        }
        if unexplained {
            let what = format!(
                "in the DLQ without a reason after {} receives (maxReceiveCount {}): {}",
                self.facts.receives, self.max_receive_count, self.what
            );
            report.broken(|t| &mut t.unjustified_endings, what);
        }
        let cancelled = self.status() == Some(Status::Cancelled)
            || reminder_status == ReminderStatus::Cancelled;
        // An edit that took the channel away cancels its delivery (the consumer's answer to
        // a message of a channel no longer listed).
        if cancelled && !self.cancel_requested && !self.edited_away {
            let what = format!("cancelled with no cancel asked: {}", self.what);
            report.broken(|t| &mut t.unjustified_endings, what);
        }
        if let Some(at) = self.expired_at().filter(|at| *at <= self.first_fresh_until) {
            let what = format!(
                "expired at {} while fresh until {}: {}",
                at.as_millis(),
                self.first_fresh_until.as_millis(),
                self.what
            );
            report.broken(|t| &mut t.unjustified_endings, what);
        }
        if let Some(why) = self.facts.unjustified.first() {
            let what = format!("{why}: {}", self.what);
            report.broken(|t| &mut t.unjustified_endings, what);
        }
        if let Some(why) = self.unchosen() {
            let what = format!("{why}: {}", self.what);
            report.broken(|t| &mut t.unjustified_endings, what);
        }
    }

    /// A recipient's-choice death the subscriber never chose: `opted_out` with no opt-out of
    /// the channel ever written, `expired_quiet_hours` with no quiet hours on it.
    fn unchosen(&self) -> Option<&'static str> {
        let reason = self
            .rec
            .filter(|r| r.status() == Status::Dead)
            .and_then(DeliveryRecord::dead_reason)?;
        let ever = |f: &dyn Fn(&PrefsWrite) -> bool| self.prefs.iter().any(f);
        match reason {
            DeadReason::OptedOut if !ever(&|w| w.prefs.opted_out.contains(&self.channel)) => {
                Some("opted_out with no opt-out of the channel")
            }
            DeadReason::ExpiredQuietHours
                if !ever(&|w| w.prefs.quiet_hours.contains_key(&self.channel)) =>
            {
                Some("expired_quiet_hours with no quiet hours on the channel")
            }
            DeadReason::Suppressed if !self.gone => Some("suppressed with no 410 for the address"),
            _ => None,
        }
    }
}

fn describe(
    key: &DeliveryKey,
    channel: reminders_core::domain::Channel,
    idempotent: bool,
    rec: Option<&DeliveryRecord>,
    r: &Reminder,
    copies: &[Copy],
    f: &KeyFacts,
) -> String {
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
    let status = rec.map_or("no item", |rec| rec.status().as_str());
    let copies: Vec<String> = copies
        .iter()
        .map(|c| {
            let at = c
                .dead_at
                .map_or("no dead_at".to_owned(), |t| t.to_rfc3339());
            format!("{} at {at}", c.reason.as_str())
        })
        .collect();
    format!(
        "{key} ({channel}, idempotent {idempotent}): ledger {status} [{}], reminder {}, DLQ copies [{}]; {}",
        history.join(", "),
        r.status.as_str(),
        copies.join(", "),
        f.summary()
    )
}

impl SeedReport {
    pub(super) fn broken(&mut self, counter: impl FnOnce(&mut Tally) -> &mut u64, what: String) {
        *counter(&mut self.tally) += 1;
        self.findings.push(what);
    }
}
