//! The verdicts on what a delivery key sent and what its deaths left in the DLQ.

use super::super::copies::classify;
use super::super::SeedReport;
use super::{Counter, Verdict};
use reminders_core::domain::DeadReason;
use reminders_core::ledger::{DeliveryRecord, Status};

impl Verdict<'_> {
    /// One DLQ copy of the current death; a second only if a second claim to copy was made.
    pub(super) fn dlq(&self, report: &mut SeedReport) {
        // The death as the journal saw it land (the item's own history is bounded).
        let current = match self.status() {
            Some(Status::Dead) => self.facts.deaths.last().copied(),
            _ => None,
        };
        let c = classify(self.copies, &self.facts.deaths, current);
        let allowed = u64::from(self.facts.copy_claims.max(1));
        let t = &mut report.tally;
        t.stale_copies += c.stale;
        t.duplicate_copies += c.of_current.min(allowed).saturating_sub(1);
        // A recipient's choice is on the ledger, never copied to the DLQ.
        let choice = self
            .rec
            .and_then(DeliveryRecord::dead_reason)
            .is_some_and(DeadReason::is_recipients_choice);
        // A death another channel took over from, or whose reminder another channel served:
        // redrive removes its copy as skipped (it never revives it).
        if self.status() == Some(Status::Dead)
            && c.of_current == 0
            && current.is_some()
            && !choice
            && !self.served_elsewhere
        {
            report.broken(|t| &mut t.dead_without_copy, self.what.clone());
        }
        let extra = c.unknown + c.of_current.saturating_sub(allowed);
        if extra > 0 {
            report.tally.extra_dlq_copies += extra;
            let what = format!("DLQ copies beyond the deaths and claims: {}", self.what);
            report.findings.push(what);
        }
    }

    pub(super) fn sends(&self, report: &mut SeedReport) {
        let f = self.facts;
        // Without deduplication, a second acceptance is allowed only by an operator's redrive
        // out of `ambiguous` (one each).
        let twice = !self.idempotent && f.acceptances > 1;
        let beyond_consent = !self.idempotent && f.acceptances > 1 + f.budget.ambiguous_redrives;
        if f.broken.after_delivered > 0 || beyond_consent {
            report.broken(|t| &mut t.duplicated, self.what.clone());
        }
        let dead_ambiguous = self.status() == Some(Status::Dead)
            && self.rec.and_then(DeliveryRecord::dead_reason) == Some(DeadReason::Ambiguous);
        if dead_ambiguous || (twice && !beyond_consent) {
            report.tally.flagged_ambiguous += 1;
        }
        report.tally.quiet_holds += u64::from(f.quiet_holds);
        let checks: [(u32, &str, Counter); 6] = [
            (f.broken.stale, "sent after fresh_until", |t| {
                &mut t.stale_sends
            }),
            (f.broken.early, "sent before its Retry-After", |t| {
                &mut t.early_sends
            }),
            (f.broken.after_cancel, "sent after its cancel", |t| {
                &mut t.sends_after_cancel
            }),
            (
                f.broken.while_opted_out,
                "sent to a channel opted out of before the claim",
                |t| &mut t.sent_while_opted_out,
            ),
            (
                f.broken.in_quiet_hours,
                "sent inside the quiet hours in force at the claim",
                |t| &mut t.sent_in_quiet_hours,
            ),
            (
                f.broken.abroad,
                "sent to an SMS number outside the allowed calling codes",
                |t| &mut t.sent_abroad,
            ),
        ];
        for (n, label, counter) in checks {
            if n > 0 {
                report.broken(counter, format!("{label}: {}", self.what));
            }
        }
        if f.budget.spent() > self.max_attempts {
            report.broken(|t| &mut t.budget_exceeded, self.what.clone());
        }
    }
}
