//! The recipient's rules (DESIGN §12), decided after the claim and before the send, so a
//! preference written before the claim is honoured as a cancel is (the claim orders them):
//! an opted-out channel is never sent (`opted_out`), a delivery inside its channel's quiet
//! hours is held until they end while it stays fresh (deferred on the ledger, nothing spent),
//! and one that would be stale by then ends `expired_quiet_hours`. No provider call, no
//! attempt spent, no DLQ copy: these are the recipient's choices, not failures.

use std::ops::ControlFlow;
use std::time::Duration;

use super::{log_transition, Action, Delivery, Lease, Record, Step};
use crate::clock::Timestamp;
use crate::delivery::state::Change;
use crate::delivery::Written;
use crate::domain::preferences::Decision;
use crate::domain::DeadReason;
use crate::ports::{Ports, ReminderStore};

impl<P: Ports> Record<'_, P> {
    /// `Continue` to send; otherwise the record ends held or dead, by the preferences.
    pub(super) async fn recipient_rules(&mut self, d: &Delivery, lease: Lease) -> Step<Lease> {
        let store = self.consumer.ports.reminders();
        let Some(prefs) = store.preferences(&d.msg.subscriber_id).await? else {
            return Ok(ControlFlow::Continue(lease));
        };
        let now = self.now();
        let action = match prefs.decide(self.inc.channel, now, d.reminder.fresh_until) {
            Decision::Send => return Ok(ControlFlow::Continue(lease)),
            Decision::Hold { until } => self.quiet_hours(d, lease, until, now).await?,
            Decision::OptedOut => {
                let why = "the subscriber opted out of this channel";
                self.recipients_choice(d, lease, DeadReason::OptedOut, why)
                    .await?
            }
            Decision::QuietUntilStale => {
                let why = "inside quiet hours, and stale before they end";
                self.recipients_choice(d, lease, DeadReason::ExpiredQuietHours, why)
                    .await?
            }
        };
        Ok(ControlFlow::Break(action))
    }

    /// Deferred (fenced, nothing spent) until the quiet hours end; the message waits as long.
    async fn quiet_hours(
        &mut self,
        d: &Delivery,
        lease: Lease,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Action, crate::ports::PortError> {
        let change = Change::Hold {
            token: lease.token,
            next_eligible_at: until,
            error: Some(format!("quiet hours until {}", until.to_rfc3339())),
        };
        match self.under_lease(d, lease.record, change).await? {
            Written::Applied(held) => {
                log_transition(
                    &d.msg,
                    held.attempt_count(),
                    "quiet_hours",
                    "hold",
                    until.since(now),
                );
                self.hold(&d.msg, until, now).await
            }
            // Our lease was taken over: the new holder's handle decides.
            Written::Refused { .. } => Ok(Action::Leave),
        }
    }

    /// Dead for `reason` (fenced, no attempt spent), with no DLQ copy.
    async fn recipients_choice(
        &mut self,
        d: &Delivery,
        lease: Lease,
        reason: DeadReason,
        why: &str,
    ) -> Result<Action, crate::ports::PortError> {
        let change = Change::Die {
            token: Some(lease.token),
            reason,
            spends_attempt: false,
            error: Some(why.to_owned()),
        };
        match self.under_lease(d, lease.record, change).await? {
            Written::Applied(dead) => {
                self.m.dead(reason);
                log_transition(
                    &d.msg,
                    dead.attempt_count(),
                    reason.as_str(),
                    "dead",
                    Duration::ZERO,
                );
                Ok(Action::Ack)
            }
            Written::Refused { .. } => Ok(Action::Leave),
        }
    }
}
