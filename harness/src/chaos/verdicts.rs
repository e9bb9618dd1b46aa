//! The verdicts on what the application was told and what the recipient got, judged from
//! what the checker observed — the API's answers (the versions it acknowledged, the versions
//! that landed), the provider's calls, the preferences written, the events published — not
//! from the ledger's own account: `expired_while_fresh`, `two_channels_sent`, `stranded`,
//! `acknowledged_change_ignored` and `event_missing` (see [`super::Tally`]).

use std::collections::{BTreeMap, BTreeSet};

use super::journal::{KeyFacts, PrefsWrite};
use super::world::World;
use super::SeedReport;
use reminders_core::clock::Timestamp;
use reminders_core::domain::{Channel, DeliveryKey, Reminder, ReminderStatus};
use reminders_core::ledger::{DeliveryRecord, Status};

/// What the checker saw of a world, for the verdicts of this module.
pub(super) struct Seen<'a> {
    pub world: &'a World,
    pub ledger: &'a BTreeMap<DeliveryKey, DeliveryRecord>,
    pub facts: &'a BTreeMap<DeliveryKey, KeyFacts>,
    pub prefs: &'a BTreeMap<reminders_core::domain::SubscriberId, Vec<PrefsWrite>>,
    pub now: Timestamp,
    /// Deliveries made `ready` by a redrive that never re-enqueued them, whose last death's
    /// copy is still in the DLQ.
    pub awaiting_redrive: BTreeSet<DeliveryKey>,
}

/// Why a delivery that did not settle is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unsettled {
    /// Its reminder is due later, or the ledger holds it until a time still ahead.
    Waiting,
    /// In standby, and the chain ahead of it ended without handing on.
    NotNeeded,
    /// In standby, and nothing will ever send it or tell why; `alarmed` when the consumer's
    /// alarmed metrics (invariant errors, panics) counted something on its channel.
    Stranded { alarmed: bool },
    /// Never in standby: the `lost` verdict.
    Lost,
}

impl Seen<'_> {
    fn key(r: &Reminder, c: Channel) -> DeliveryKey {
        DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, c)
    }

    fn facts(&self, key: &DeliveryKey) -> Option<&KeyFacts> {
        self.facts.get(key)
    }

    fn writes(&self, r: &Reminder) -> &[PrefsWrite] {
        self.prefs
            .get(&r.subscriber_id)
            .map_or(&[][..], Vec::as_slice)
    }

    /// Every channel any version of `r` that landed listed.
    fn ever_listed(&self, r: &Reminder) -> BTreeSet<Channel> {
        let landed = self.world.acks.landed_versions(&r.reminder_id);
        landed.into_iter().flat_map(|l| l.channels).collect()
    }

    /// A channel that did not settle: waiting, not needed, stranded or lost.
    pub fn unsettled(&self, r: &Reminder, channel: Channel) -> Unsettled {
        let rec = self.ledger.get(&Self::key(r, channel));
        let ahead = |t: Option<Timestamp>| t.is_some_and(|t| t > self.now);
        if r.due_at > self.now || ahead(rec.and_then(DeliveryRecord::next_eligible_at)) {
            return Unsettled::Waiting;
        }
        let listed = self.ever_listed(r);
        // In an order of two or more listed channels, at any place: a standby waits for
        // the channel ahead, and the head itself is not needed once another channel of the
        // order (claimed on its own before the order) may have reached the person.
        let standby = self.writes(r).iter().any(|w| {
            let order: Vec<Channel> = w
                .prefs
                .fallback
                .iter()
                .copied()
                .filter(|c| listed.contains(c))
                .collect();
            order.len() >= 2 && order.contains(&channel)
        });
        if !standby {
            return Unsettled::Lost;
        }
        // One that may have reached the person ends it whatever it is now (redriven, say).
        let ends_chain = |rec: &DeliveryRecord| match rec.status() {
            _ if rec.may_have_reached() => true,
            Status::Delivered | Status::Expired | Status::Cancelled => true,
            Status::Dead => !rec.dead_reason().is_some_and(|d| d.falls_back()),
            _ => false,
        };
        let ended = listed
            .iter()
            .filter(|c| **c != channel)
            .filter_map(|c| self.ledger.get(&Self::key(r, *c)))
            .any(ends_chain);
        if ended {
            return Unsettled::NotNeeded;
        }
        // A channel of the chain waits for a redrive, its copy in the DLQ: the DLQ's alarm
        // counts it, and the redrive that resends it moves the chain on.
        let awaiting = listed
            .iter()
            .any(|c| *c != channel && self.awaiting_redrive.contains(&Self::key(r, *c)));
        let alarms = reminders_core::sync::lock(&self.world.alarms);
        Unsettled::Stranded {
            alarmed: awaiting || alarms.get(&channel).copied().unwrap_or(0) > 0,
        }
    }

    /// `expired_while_fresh`: each write into `expired` against the version in force then
    /// (the last that landed), as the API acknowledged it.
    pub fn expired_while_fresh(&self, r: &Reminder, report: &mut SeedReport) {
        let landed = self.world.acks.landed_versions(&r.reminder_id);
        let acked = self.world.acks.acked_versions(&r.reminder_id);
        for channel in Channel::ALL {
            let key = Self::key(r, channel);
            let Some(f) = self.facts(&key) else { continue };
            for (seq, at) in &f.expiries {
                let in_force = landed.iter().rev().find(|l| l.seq < *seq);
                let version = in_force.map(|l| l.payload_version);
                let told = acked
                    .iter()
                    .find(|a| Some(a.reminder.payload_version) == version);
                if let Some(a) = told.filter(|a| *at <= a.reminder.fresh_until) {
                    let what = format!(
                        "{key} ({channel}) expired at {} while version {} the API acknowledged is fresh until {}",
                        at.to_rfc3339(),
                        a.reminder.payload_version,
                        a.reminder.fresh_until.to_rfc3339()
                    );
                    report.broken(|t| &mut t.expired_while_fresh, what);
                    break;
                }
            }
        }
    }

    /// `two_channels_sent`: a call on one channel after another channel's call that may have
    /// reached the person, while every fallback order readable from the earlier of the two
    /// claims to this call held both; or, whatever the orders, after the call of a channel
    /// that took the reminder over from this one (the chain's own account: a channel that
    /// handed on is never sent again), or after the call of a channel claimed as the head of
    /// an order that held this one, before this one's first claim (the chain the head's claim
    /// recorded stands, whatever the orders since: cleared, or set without the head).
    pub fn two_channels_sent(&self, r: &Reminder, report: &mut SeedReport) {
        let sends: Vec<(Channel, &super::journal::SendFact)> = Channel::ALL
            .into_iter()
            .filter_map(|c| self.facts(&Self::key(r, c)).map(|f| (c, f)))
            .flat_map(|(c, f)| f.sends.iter().map(move |s| (c, s)))
            .collect();
        let writes = self.writes(r);
        // `a` took the reminder over from `b` (its claim's `fallback_from`), and this send of `b`
        // came after a death of `b`: `b` was revived (a redrive) after it handed on. (Which
        // claim set `a`'s origin the final item does not say; `b`'s death before its send does.)
        let took_over = |a: Channel, b: Channel, sb: &super::journal::SendFact| {
            let from = self
                .ledger
                .get(&Self::key(r, a))
                .and_then(|rec| rec.fallback_from());
            let died_before = self.ledger.get(&Self::key(r, b)).is_some_and(|rec| {
                rec.history()
                    .into_iter()
                    .any(|(_, h)| h.to == Status::Dead && h.from != Status::Dead && h.at < sb.at)
            });
            from == Some(b) && died_before
        };
        let first_claim = |c: Channel, s: &super::journal::SendFact| {
            self.facts(&Self::key(r, c))
                .and_then(|f| f.first_claim)
                .or(s.claim)
                .unwrap_or(s.seq)
        };
        // `a` was claimed as the head of an order that held `b`, before `b`'s first claim.
        // Not yet judged for `b` sent as a third channel's fallback (two chains, one handed
        // on under a newer order): the consumer holds such a fallback behind `a`, but the
        // worlds still find it sent after `a` now and then, a window this verdict leaves open.
        let behind_head = |a: Channel, sa, b: Channel, sb| {
            let fallback = self
                .ledger
                .get(&Self::key(r, b))
                .is_some_and(|rec| rec.fallback_from().is_some_and(|from| from != a));
            if fallback {
                return false;
            }
            let recorded = self.ledger.get(&Self::key(r, a)).and_then(|rec| {
                let o = rec.origin()?;
                (o.chain_head && o.fallback_from.is_none()).then(|| o.chain.clone())
            });
            recorded.is_some_and(|chain| chain.contains(&b))
                && first_claim(a, sa) < first_claim(b, sb)
        };
        for (b, sb) in &sends {
            let Some(claim) = sb.claim else { continue };
            let first = sends
                .iter()
                .filter(|(a, sa)| a != b && sa.seq < sb.seq && sa.may_have_reached())
                .find(|(a, sa)| {
                    // From the earlier of the two first claims: an order set while both were
                    // in flight (claimed, if only once) changes nothing for them.
                    let from = first_claim(*a, sa).min(first_claim(*b, sb)).min(claim);
                    both_ordered(writes, *a, *b, from, sb.seq)
                        || took_over(*a, *b, sb)
                        || behind_head(*a, sa, *b, sb)
                });
            if let Some((a, sa)) = first {
                let history = |c: Channel| {
                    self.ledger.get(&Self::key(r, c)).map(|rec| {
                        let h: Vec<String> = rec
                            .history()
                            .into_iter()
                            .map(|(n, h)| {
                                let d = h.detail.as_deref().unwrap_or("");
                                format!("{n}:{}->{} {d}", h.from.as_str(), h.to.as_str())
                            })
                            .collect();
                        (rec.fallback_from(), rec.fallback_to(), rec.expires_at(), h)
                    })
                };
                let orders: Vec<(u64, Vec<Channel>)> = writes
                    .iter()
                    .map(|w| (w.seq, w.prefs.fallback.clone()))
                    .collect();
                let what = format!(
                    "{} sent on {b} at {} (seq {}, claim {claim}) after {a}'s call at {} (seq {}, reached {:?}) may have reached the person, both in the fallback order (or the chain its head recorded); {a}: {:?}; {b}: {:?}; orders {orders:?}",
                    r.reminder_id,
                    sb.at.to_rfc3339(),
                    sb.seq,
                    sa.at.to_rfc3339(),
                    sa.seq,
                    sa.reached,
                    history(*a),
                    history(*b),
                );
                report.broken(|t| &mut t.two_channels_sent, what);
                return;
            }
        }
    }

    /// `acknowledged_change_ignored`: the keys it fired for (judged nothing else).
    pub fn acknowledged_change_ignored(
        &self,
        r: &Reminder,
        report: &mut SeedReport,
    ) -> BTreeSet<DeliveryKey> {
        let landed = self.world.acks.landed_versions(&r.reminder_id);
        let acked = self.world.acks.acked_versions(&r.reminder_id);
        let mut fired = BTreeSet::new();
        for a in acked.iter().skip(1) {
            let p = a.reminder.payload_version;
            let Some(before) = landed.iter().find(|l| l.payload_version + 1 == p) else {
                continue;
            };
            for c in a
                .reminder
                .channels()
                .filter(|c| !before.channels.contains(c))
            {
                let removed_later = landed
                    .iter()
                    .any(|l| l.payload_version > p && !l.channels.contains(&c));
                let key = Self::key(r, c);
                if removed_later || fired.contains(&key) || self.told(r, c) {
                    continue;
                }
                let what = format!(
                    "{key}: {c} added by version {p}, which the API acknowledged, was never sent and nothing tells why"
                );
                report.broken(|t| &mut t.acknowledged_change_ignored, what);
                fired.insert(key);
            }
        }
        fired
    }

    /// Whether channel `c` of `r` was sent, or a `GET` tells why not (or tells that it waits).
    fn told(&self, r: &Reminder, c: Channel) -> bool {
        let key = Self::key(r, c);
        let sent = self.facts(&key).is_some_and(|f| !f.sends.is_empty());
        // Cancelled is a reason only when the application asked for it: an edit that took
        // the channel away cancels it, and adding it back must then send it.
        let asked =
            reminders_core::sync::lock(&self.world.cancel_requests).contains(&r.reminder_id);
        let final_rec = self.ledger.get(&key).is_some_and(|rec| match rec.status() {
            Status::Cancelled => asked,
            s => reminders_core::events::is_settled(s),
        });
        let final_reminder = matches!(
            r.status,
            ReminderStatus::Cancelled | ReminderStatus::Expired | ReminderStatus::Invalid
        );
        let listed = r.recipients.contains_key(&c);
        let waits = listed
            && matches!(
                self.unsettled(r, c),
                Unsettled::Waiting | Unsettled::NotNeeded
            );
        sent || final_rec || final_reminder || waits
    }
}

/// Every fallback order of `writes` in force from order number `from` to `to` lists both.
fn both_ordered(writes: &[PrefsWrite], a: Channel, b: Channel, from: u64, to: u64) -> bool {
    let holds = |w: &PrefsWrite| w.prefs.fallback.contains(&a) && w.prefs.fallback.contains(&b);
    let Some(at_start) = writes.iter().rev().find(|w| w.seq < from) else {
        return false;
    };
    holds(at_start)
        && writes
            .iter()
            .filter(|w| w.seq > from && w.seq < to)
            .all(holds)
}

/// `event_missing`, and what the world generated, counted.
pub(super) fn world_wide(world: &World, report: &mut SeedReport) {
    for (key, transition, moved) in world.tap.missing(&world.bus) {
        let what = format!("{key}: its ledger write number {transition} ({moved}) settled the delivery, and no outcome event of it reached the bus by the world's end");
        report.broken(|t| &mut t.event_missing, what);
    }
    for (key, transition, how) in world.tap.misread(&world.bus) {
        let what = format!("{key}: the outcome event of its ledger write number {transition} names the reason {how} (the reason the stream image carried)");
        report.broken(|t| &mut t.event_missing, what);
    }
    let t = &mut report.tally;
    t.settled_transitions += world.tap.settled_transitions();
    t.newer_values_read += world.tap.newer_values();
    t.gone_answers += world.journal.gone_answers();
    t.cancels_racing_redrives += world.counts.racing();
    t.prompted_edits += world.counts.prompted();
    t.add(&reminders_core::sync::lock(&world.counts.series));
    t.edits_refused += world.counts.refused();
    let (one_read, released) = *reminders_core::sync::lock(&world.one_reads);
    t.one_read += one_read;
    t.one_read_released += released;
    for k in world.acks.edits() {
        t.edits_applied += 1;
        t.edits_due_earlier += u64::from(k.due_earlier);
        t.edits_due_later += u64::from(k.due_later);
        t.edits_past_horizon += u64::from(k.past_horizon);
        t.edits_freshness += u64::from(k.freshness);
        t.edits_content += u64::from(k.content);
        t.edits_channel_removed += u64::from(k.removed);
        t.edits_channel_added += u64::from(k.added);
        t.edits_channel_readded += u64::from(k.readded);
        t.edits_of_stale += u64::from(k.of_stale);
        t.edits_sms_abroad += u64::from(k.abroad);
    }
    for f in world.journal.facts().values() {
        t.fallbacks_taken += u64::from(f.fell_back);
        t.redrives_executed += u64::from(f.budget.redrives);
    }
    for writes in world.journal.preference_writes().values() {
        let mut last: &[Channel] = &[];
        for w in writes {
            let next = w.prefs.fallback.as_slice();
            match (last.is_empty(), next.is_empty()) {
                (true, false) => t.orders_set += 1,
                (false, true) => t.orders_cleared += 1,
                (false, false) if last != next => t.reorders += 1,
                _ => {}
            }
            last = next;
        }
    }
}
