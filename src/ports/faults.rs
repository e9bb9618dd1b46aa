//! Fault injection for the in-memory ports: "fail the next N calls of `op`, before or after
//! the effect". Operation names are the `OP_*` constants of each port module.

use std::sync::{Arc, Mutex};

use super::PortError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// The call fails and nothing happened.
    Before,
    /// The effect happened, then the caller sees an error (a lost response).
    After,
}

#[derive(Debug)]
struct Rule {
    op: &'static str,
    point: FaultPoint,
    /// Calls that pass before the rule starts failing.
    skip: u32,
    remaining: u32,
    /// Answer `Corrupt` (an item this version cannot read) instead of `Injected`.
    corrupt: bool,
}

/// Shared between a test and the ports it wraps; cloning shares the rules.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<Mutex<Vec<Rule>>>);

impl Faults {
    /// Make the next `times` calls of `op` fail at `point`.
    pub fn fail(&self, op: &'static str, point: FaultPoint, times: u32) {
        self.fail_after(op, point, 0, times);
    }

    /// Let `skip` calls of `op` pass, then fail the next `times`.
    pub fn fail_after(&self, op: &'static str, point: FaultPoint, skip: u32, times: u32) {
        self.lock().push(Rule {
            op,
            point,
            skip,
            remaining: times,
            corrupt: false,
        });
    }

    /// Make the next `times` calls of `op` answer that the stored item is unreadable, as a
    /// malformed item another writer stored would (for stores that cannot hold one).
    pub fn corrupt(&self, op: &'static str, times: u32) {
        self.lock().push(Rule {
            op,
            point: FaultPoint::Before,
            skip: 0,
            remaining: times,
            corrupt: true,
        });
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Called by the ports at both points of every operation.
    pub(crate) fn check(&self, op: &'static str, point: FaultPoint) -> Result<(), PortError> {
        let mut rules = self.lock();
        let hit = rules
            .iter_mut()
            .find(|r| r.op == op && r.point == point && r.remaining > 0);
        match hit {
            Some(rule) if rule.skip > 0 => {
                rule.skip -= 1;
                Ok(())
            }
            Some(rule) if rule.corrupt => {
                rule.remaining -= 1;
                Err(PortError::Corrupt {
                    op,
                    message: "injected: the stored item is unreadable".into(),
                })
            }
            Some(rule) => {
                rule.remaining -= 1;
                Err(PortError::Injected { op, point })
            }
            None => Ok(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Rule>> {
        // A panic elsewhere cannot leave the rule list half-written: recover it.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Any ledger, with faults injected around its calls: the same fault plan for the in-memory
/// ledger and the DynamoDB adapter (where it plays a lost response or an outage).
#[derive(Debug, Clone)]
pub struct Faulty<T> {
    pub inner: T,
    pub faults: Faults,
}

impl<T: super::Ledger> super::Ledger for Faulty<T> {
    async fn get(
        &self,
        key: &crate::domain::DeliveryKey,
    ) -> Result<Option<crate::delivery::state::DeliveryRecord>, PortError> {
        self.faults
            .check(super::ledger::OP_GET, FaultPoint::Before)?;
        let out = self.inner.get(key).await?;
        self.faults
            .check(super::ledger::OP_GET, FaultPoint::After)?;
        Ok(out)
    }

    async fn put_if(
        &self,
        record: &crate::delivery::state::DeliveryRecord,
        expected: super::Expected,
    ) -> Result<super::Cas, PortError> {
        self.faults
            .check(super::ledger::OP_PUT, FaultPoint::Before)?;
        let out = self.inner.put_if(record, expected).await?;
        self.faults
            .check(super::ledger::OP_PUT, FaultPoint::After)?;
        Ok(out)
    }
}

impl<T: super::ReminderStore> super::ReminderStore for Faulty<T> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }

    async fn sweep_index(
        &self,
        after: Option<&super::SweepCursor>,
        limit: u32,
    ) -> Result<super::SweepPage, PortError> {
        let call = self.inner.sweep_index(after, limit);
        self.around(super::reminders::OP_SWEEP, call).await
    }

    async fn insert(&self, r: &crate::domain::Reminder) -> Result<super::Inserted, PortError> {
        self.around(super::reminders::OP_INSERT, self.inner.insert(r))
            .await
    }

    async fn replace(
        &self,
        r: &crate::domain::Reminder,
        expected_version: u64,
        expected_status: crate::domain::ReminderStatus,
    ) -> Result<super::Marked, PortError> {
        let op = super::reminders::OP_REPLACE;
        let call = self.inner.replace(r, expected_version, expected_status);
        self.around(op, call).await
    }

    async fn get(
        &self,
        id: &crate::domain::ReminderId,
    ) -> Result<Option<crate::domain::Reminder>, PortError> {
        self.around(super::reminders::OP_GET, self.inner.get(id))
            .await
    }

    async fn query_due(&self, q: &super::DueQuery<'_>) -> Result<super::DuePage, PortError> {
        self.around(super::reminders::OP_QUERY, self.inner.query_due(q))
            .await
    }

    async fn quarantine(&self, key: &str, reason: &str) -> Result<super::Marked, PortError> {
        let op = super::reminders::OP_QUARANTINE;
        self.around(op, self.inner.quarantine(key, reason)).await
    }

    async fn extend_freshness(
        &self,
        id: &crate::domain::ReminderId,
        payload_version: u64,
        fresh_until: crate::clock::Timestamp,
        expires_at: i64,
    ) -> Result<super::Marked, PortError> {
        let op = super::reminders::OP_EXTEND;
        let call = self
            .inner
            .extend_freshness(id, payload_version, fresh_until, expires_at);
        self.around(op, call).await
    }

    async fn mark(
        &self,
        id: &crate::domain::ReminderId,
        payload_version: u64,
        to: crate::domain::ReminderStatus,
    ) -> Result<super::Marked, PortError> {
        let op = super::reminders::OP_MARK;
        self.around(op, self.inner.mark(id, payload_version, to))
            .await
    }
    async fn preferences(
        &self,
        subscriber: &crate::domain::SubscriberId,
    ) -> Result<Option<crate::domain::Preferences>, PortError> {
        let op = super::reminders::OP_PREFERENCES;
        self.around(op, self.inner.preferences(subscriber)).await
    }
    async fn put_preferences(
        &self,
        subscriber: &crate::domain::SubscriberId,
        prefs: &crate::domain::Preferences,
    ) -> Result<(), PortError> {
        let op = super::reminders::OP_PUT_PREFERENCES;
        self.around(op, self.inner.put_preferences(subscriber, prefs))
            .await
    }
    async fn suppression(
        &self,
        address: &crate::domain::AddressHash,
    ) -> Result<Option<crate::domain::Suppression>, PortError> {
        let op = super::reminders::OP_SUPPRESSION;
        self.around(op, self.inner.suppression(address)).await
    }
    async fn put_suppression(&self, s: &crate::domain::Suppression) -> Result<(), PortError> {
        let op = super::reminders::OP_PUT_SUPPRESSION;
        self.around(op, self.inner.put_suppression(s)).await
    }
}

impl<T: super::DeadLetters> super::DeadLetters for Faulty<T> {
    async fn dead_letter(
        &self,
        channel: crate::domain::Channel,
        body: &str,
        letter: &crate::deadletter::DeadLetter,
    ) -> Result<(), PortError> {
        let op = super::queue::OP_DEAD_LETTER;
        self.around(op, self.inner.dead_letter(channel, body, letter))
            .await
    }

    async fn receive_dead(
        &self,
        channel: crate::domain::Channel,
        max: u32,
        visibility_secs: u32,
    ) -> Result<Vec<super::DeadLetterMessage>, PortError> {
        let op = super::queue::OP_RECEIVE;
        self.around(op, self.inner.receive_dead(channel, max, visibility_secs))
            .await
    }

    async fn delete_dead(
        &self,
        channel: crate::domain::Channel,
        receipt_handle: &str,
    ) -> Result<(), PortError> {
        let op = super::queue::OP_DELETE;
        self.around(op, self.inner.delete_dead(channel, receipt_handle))
            .await
    }

    async fn release_dead(
        &self,
        channel: crate::domain::Channel,
        receipt_handle: &str,
    ) -> Result<(), PortError> {
        let op = super::queue::OP_VISIBILITY;
        self.around(op, self.inner.release_dead(channel, receipt_handle))
            .await
    }
}

impl<T> Faulty<T> {
    async fn around<R>(
        &self,
        op: &'static str,
        call: impl std::future::Future<Output = Result<R, PortError>>,
    ) -> Result<R, PortError> {
        self.faults.check(op, FaultPoint::Before)?;
        let out = call.await?;
        self.faults.check(op, FaultPoint::After)?;
        Ok(out)
    }
}

/// Lock a port's state, surviving a poisoned mutex (a test that panicked mid-call).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn can_let_calls_pass_first() {
        let f = Faults::default();
        f.fail_after("x", FaultPoint::Before, 1, 1);
        assert!(f.check("x", FaultPoint::Before).is_ok());
        assert!(f.check("x", FaultPoint::Before).is_err());
        assert!(f.check("x", FaultPoint::Before).is_ok());
    }

    #[test]
    fn fails_the_named_op_the_given_number_of_times() {
        let f = Faults::default();
        f.fail("x", FaultPoint::After, 2);
        assert!(f.check("x", FaultPoint::Before).is_ok());
        assert!(f.check("y", FaultPoint::After).is_ok());
        assert!(f.check("x", FaultPoint::After).is_err());
        assert!(f.check("x", FaultPoint::After).is_err());
        assert!(f.check("x", FaultPoint::After).is_ok());
    }
}

/// A port whose every call first waits `latency` on `clock` (virtual time with the manual
/// clock): a slow dependency, for tests of progress under load.
#[derive(Debug, Clone)]
pub struct Slowed<T, C> {
    pub inner: T,
    pub clock: C,
    pub latency: std::time::Duration,
}

impl<T, C: crate::clock::Clock> Slowed<T, C> {
    async fn wait(&self) {
        self.clock.sleep(self.latency).await;
    }
}

impl<T: super::ReminderStore, C: crate::clock::Clock> super::ReminderStore for Slowed<T, C> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    async fn sweep_index(
        &self,
        after: Option<&super::SweepCursor>,
        limit: u32,
    ) -> Result<super::SweepPage, PortError> {
        self.wait().await;
        self.inner.sweep_index(after, limit).await
    }
    async fn insert(&self, r: &crate::domain::Reminder) -> Result<super::Inserted, PortError> {
        self.wait().await;
        self.inner.insert(r).await
    }
    async fn replace(
        &self,
        r: &crate::domain::Reminder,
        expected_version: u64,
        expected_status: crate::domain::ReminderStatus,
    ) -> Result<super::Marked, PortError> {
        self.wait().await;
        self.inner
            .replace(r, expected_version, expected_status)
            .await
    }
    async fn get(
        &self,
        id: &crate::domain::ReminderId,
    ) -> Result<Option<crate::domain::Reminder>, PortError> {
        self.wait().await;
        self.inner.get(id).await
    }
    async fn query_due(&self, q: &super::DueQuery<'_>) -> Result<super::DuePage, PortError> {
        self.wait().await;
        self.inner.query_due(q).await
    }
    async fn quarantine(&self, key: &str, reason: &str) -> Result<super::Marked, PortError> {
        self.wait().await;
        self.inner.quarantine(key, reason).await
    }
    async fn extend_freshness(
        &self,
        id: &crate::domain::ReminderId,
        payload_version: u64,
        fresh_until: crate::clock::Timestamp,
        expires_at: i64,
    ) -> Result<super::Marked, PortError> {
        self.wait().await;
        let call = self
            .inner
            .extend_freshness(id, payload_version, fresh_until, expires_at);
        call.await
    }
    async fn mark(
        &self,
        id: &crate::domain::ReminderId,
        payload_version: u64,
        to: crate::domain::ReminderStatus,
    ) -> Result<super::Marked, PortError> {
        self.wait().await;
        self.inner.mark(id, payload_version, to).await
    }
    async fn preferences(
        &self,
        subscriber: &crate::domain::SubscriberId,
    ) -> Result<Option<crate::domain::Preferences>, PortError> {
        self.wait().await;
        self.inner.preferences(subscriber).await
    }
    async fn put_preferences(
        &self,
        subscriber: &crate::domain::SubscriberId,
        prefs: &crate::domain::Preferences,
    ) -> Result<(), PortError> {
        self.inner.put_preferences(subscriber, prefs).await
    }
    async fn suppression(
        &self,
        address: &crate::domain::AddressHash,
    ) -> Result<Option<crate::domain::Suppression>, PortError> {
        self.wait().await;
        self.inner.suppression(address).await
    }
    async fn put_suppression(&self, s: &crate::domain::Suppression) -> Result<(), PortError> {
        self.inner.put_suppression(s).await
    }
}

impl<T: super::DeliveryQueue, C: crate::clock::Clock> super::DeliveryQueue for Slowed<T, C> {
    async fn send_batch(
        &self,
        channel: crate::domain::Channel,
        messages: &[super::OutgoingMessage],
    ) -> Result<Vec<super::SendFailure>, PortError> {
        self.wait().await;
        self.inner.send_batch(channel, messages).await
    }
    async fn change_visibility(
        &self,
        channel: crate::domain::Channel,
        receipt_handle: &str,
        secs: u32,
    ) -> Result<(), PortError> {
        self.wait().await;
        self.inner
            .change_visibility(channel, receipt_handle, secs)
            .await
    }
    async fn delete(
        &self,
        channel: crate::domain::Channel,
        receipt_handle: &str,
    ) -> Result<(), PortError> {
        self.wait().await;
        self.inner.delete(channel, receipt_handle).await
    }
    async fn receive(
        &self,
        channel: crate::domain::Channel,
        max: u32,
        visibility_secs: u32,
    ) -> Result<Vec<super::ReceivedMessage>, PortError> {
        self.wait().await;
        self.inner.receive(channel, max, visibility_secs).await
    }
    async fn depth(&self, channel: crate::domain::Channel) -> Result<super::QueueDepth, PortError> {
        self.wait().await;
        self.inner.depth(channel).await
    }
}

impl<T: super::Ledger, C: crate::clock::Clock> super::Ledger for Slowed<T, C> {
    async fn get(
        &self,
        key: &crate::domain::DeliveryKey,
    ) -> Result<Option<crate::delivery::state::DeliveryRecord>, PortError> {
        self.wait().await;
        self.inner.get(key).await
    }

    async fn put_if(
        &self,
        record: &crate::delivery::state::DeliveryRecord,
        expected: super::Expected,
    ) -> Result<super::Cas, PortError> {
        self.wait().await;
        self.inner.put_if(record, expected).await
    }
}
