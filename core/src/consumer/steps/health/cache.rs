//! The warm container's copy of the provider gates (docs/design.md, "Provider gate"), shared by
//! every record in flight and refreshed single-flight: when a partition's copy has expired, one
//! record reads the gate item and the others wait for that read instead of issuing their own. A 429
//! seen here updates the copy at once, without a read.
//!
//! Staleness is cheap: a worker that has not yet seen another worker's closing sends, gets the
//! provider's own 429 (which never spends the attempt budget) and learns from it. The one
//! figure a copy must not guess is a probe's count of failed probes (its failure's cool-down
//! follows it): the probe write is won only at the stored count, and the count it was won at
//! is kept here, by the probe's token, until the probe ends.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::Timestamp;
use crate::ports::gate::GateState;
use crate::ports::{Gate, GatePartition, PortError};

/// One partition's copy: when it was read, and what the gate item said then.
#[derive(Debug, Clone, Copy)]
struct Copy {
    read_at: Timestamp,
    state: GateState,
    /// Known to differ from the item (a write of ours that the copy could not take): the next
    /// look reads the item, whatever the copy's age.
    stale: bool,
}

impl Copy {
    fn fresh(read_at: Timestamp, state: GateState) -> Self {
        Self {
            read_at,
            state,
            stale: false,
        }
    }
}

// futures' mutex, not tokio's: it takes no part in tokio's cooperative budget, so where a record
// yields never depends on what ran before it in the task (the simulation stays byte for byte).
type Slot = Arc<futures::lock::Mutex<Option<Copy>>>;

#[derive(Debug)]
pub(crate) struct GateCache {
    ttl: Duration,
    slots: Mutex<BTreeMap<GatePartition, Slot>>,
    /// The probe this container holds per partition (one at most: the breaker lets one in
    /// flight), by its token, with the failed-probe count its write was won at.
    probes: Mutex<BTreeMap<GatePartition, (Timestamp, u32)>>,
}

impl GateCache {
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            slots: Mutex::default(),
            probes: Mutex::default(),
        }
    }

    /// This container won `partition`'s probe `token` at `reopens` failed probes (the write's
    /// condition made that the stored count). A probe whose worker died is replaced by the
    /// next one won here.
    pub(crate) fn probing(&self, partition: &GatePartition, token: Timestamp, reopens: u32) {
        crate::consumer::lock(&self.probes).insert(partition.clone(), (token, reopens));
    }

    /// The probe `token` ended: the failed-probe count it was won at, if it was won here.
    pub(crate) fn probed(&self, partition: &GatePartition, token: Timestamp) -> Option<u32> {
        let mut probes = crate::consumer::lock(&self.probes);
        match probes.get(partition) {
            Some((held, reopens)) if *held == token => {
                let reopens = *reopens;
                probes.remove(partition);
                Some(reopens)
            }
            _ => None,
        }
    }

    fn slot(&self, partition: &GatePartition) -> Slot {
        let mut slots = crate::consumer::lock(&self.slots);
        match slots.get(partition) {
            Some(slot) => slot.clone(),
            None => {
                let slot = Slot::default();
                slots.insert(partition.clone(), slot.clone());
                slot
            }
        }
    }

    /// The partition's gate as of `now`: from the copy while it is younger than the TTL,
    /// otherwise from one read of the gate item that concurrent callers share.
    pub(crate) async fn state(
        &self,
        gate: &impl Gate,
        partition: &GatePartition,
        now: Timestamp,
    ) -> Result<GateState, PortError> {
        let slot = self.slot(partition);
        let mut copy = slot.lock().await;
        Ok(match *copy {
            Some(c) if !c.stale && now.since(c.read_at) < self.ttl => c.state,
            _ => {
                let state = gate.state(partition).await?;
                *copy = Some(Copy::fresh(now, state));
                state
            }
        })
    }

    /// The copy as it is, however old, without a read (`None` when there is none).
    pub(crate) async fn peek(&self, partition: &GatePartition) -> Option<GateState> {
        self.slot(partition).lock().await.map(|c| c.state)
    }

    /// Until when `partition` is throttled, as of `now`.
    #[cfg(test)]
    pub(crate) async fn closed_until(
        &self,
        gate: &impl Gate,
        partition: &GatePartition,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, PortError> {
        let state = self.state(gate, partition, now).await?;
        Ok(state.throttled_until.filter(|u| *u > now))
    }

    /// A 429 said the partition is closed until `until`: the copy takes it (never shortening a
    /// later closing) and counts as fresh from `now`.
    pub(crate) async fn learned(
        &self,
        partition: &GatePartition,
        now: Timestamp,
        until: Timestamp,
    ) {
        let slot = self.slot(partition);
        let mut copy = slot.lock().await;
        let mut state = copy.map(|c| c.state).unwrap_or_default();
        state.throttled_until = Some(state.throttled_until.map_or(until, |u| u.max(until)));
        *copy = Some(Copy {
            stale: copy.is_some_and(|c| c.stale),
            ..Copy::fresh(now, state)
        });
    }

    /// What this worker just wrote or learned of the breaker, in the copy at once (fresh from
    /// `now`), so its next record acts on it without a read. `f` answers the copy after the
    /// change, or `None` when the copy cannot take it (the write's condition held on the
    /// item but not on the copy: the copy is behind another worker's write): the copy is
    /// then known stale, and the next look reads the item instead of trusting it for a TTL.
    /// A copy it does not have stays missing (the next look reads the item): a made-up
    /// default would hide a throttle or an open breaker for a whole TTL.
    pub(crate) async fn update(
        &self,
        partition: &GatePartition,
        now: Timestamp,
        f: impl FnOnce(&GateState) -> Option<GateState>,
    ) {
        let slot = self.slot(partition);
        let mut copy = slot.lock().await;
        if let Some(c) = copy.as_mut() {
            match f(&c.state) {
                // A stale copy stays stale: a change on top of it is no read of the item.
                Some(state) if !c.stale => *c = Copy::fresh(now, state),
                Some(state) => c.state = state,
                None => c.stale = true,
            }
        }
    }

    /// The whole item as a write just answered it: the copy, fresh from `now`.
    pub(crate) async fn set(&self, partition: &GatePartition, now: Timestamp, state: GateState) {
        let slot = self.slot(partition);
        *slot.lock().await = Some(Copy::fresh(now, state));
    }

    /// Forget the copy: the next look reads the item.
    pub(crate) async fn forget(&self, partition: &GatePartition) {
        *self.slot(partition).lock().await = None;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::domain::Channel;
    use crate::ports::gate::BreakerChange;
    use crate::ports::MemoryGate;

    /// A gate that counts its reads and takes a while to answer, so that callers overlap.
    #[derive(Default)]
    struct Slow {
        inner: MemoryGate,
        reads: AtomicU32,
    }

    impl Gate for Slow {
        async fn state(&self, p: &GatePartition) -> Result<GateState, PortError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.inner.state(p).await
        }
        async fn throttle(&self, p: &GatePartition, until: Timestamp) -> Result<(), PortError> {
            self.inner.throttle(p, until).await
        }
        async fn failed(&self, p: &GatePartition, now: Timestamp) -> Result<GateState, PortError> {
            self.inner.failed(p, now).await
        }
        async fn breaker(
            &self,
            p: &GatePartition,
            change: crate::ports::gate::BreakerChange,
        ) -> Result<bool, PortError> {
            self.inner.breaker(p, change).await
        }
    }

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000 + ms)
    }

    #[tokio::test(start_paused = true)]
    async fn ten_concurrent_records_share_one_read() {
        let gate = Slow::default();
        let p = GatePartition::new(Channel::Push, "fcm");
        gate.inner.throttle(&p, t(500)).await.unwrap();
        let cache = GateCache::new(Duration::from_secs(5));
        let answers =
            futures::future::join_all((0..10).map(|_| cache.closed_until(&gate, &p, t(0)))).await;
        assert!(answers.iter().all(|a| *a.as_ref().unwrap() == Some(t(500))));
        assert_eq!(gate.reads.load(Ordering::SeqCst), 1);
        // Within the TTL: no read; the closing has passed by then.
        assert_eq!(cache.closed_until(&gate, &p, t(4_999)).await.unwrap(), None);
        assert_eq!(gate.reads.load(Ordering::SeqCst), 1);
        // Expired: one more read.
        cache.closed_until(&gate, &p, t(5_000)).await.unwrap();
        assert_eq!(gate.reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_updates_the_copy_without_a_read_and_never_shortens_it() {
        let gate = Slow::default();
        let p = GatePartition::new(Channel::Sms, "sns-sms");
        let cache = GateCache::new(Duration::from_secs(5));
        assert_eq!(cache.closed_until(&gate, &p, t(0)).await.unwrap(), None);
        cache.learned(&p, t(100), t(9_000)).await;
        cache.learned(&p, t(200), t(3_000)).await;
        assert_eq!(
            cache.closed_until(&gate, &p, t(300)).await.unwrap(),
            Some(t(9_000))
        );
        assert_eq!(gate.reads.load(Ordering::SeqCst), 1);
        // Partitions are independent.
        let other = GatePartition::new(Channel::Sms, "other");
        assert_eq!(
            cache.closed_until(&gate, &other, t(300)).await.unwrap(),
            None
        );
        assert_eq!(gate.reads.load(Ordering::SeqCst), 2);
    }

    /// A breaker write of this worker's applied to the item, but the copy cannot take it: the
    /// copy is behind another worker's write. It is then known stale and the next look reads
    /// the item, within the TTL too, instead of acting on a wrong copy for a whole TTL; a
    /// later change on top of it does not make it fresh; the read does.
    #[tokio::test(start_paused = true)]
    async fn a_change_the_copy_cannot_take_leaves_it_stale_until_read() {
        let gate = Slow::default();
        let p = GatePartition::new(Channel::Push, "fcm");
        let cache = GateCache::new(Duration::from_secs(5));
        assert_eq!(cache.state(&gate, &p, t(0)).await.unwrap().breaker, None);
        // Another worker opens the breaker and takes its probe; this copy saw neither.
        let open = BreakerChange::Open {
            now: t(10),
            until: t(20),
        };
        assert!(gate.inner.breaker(&p, open).await.unwrap());
        let probe = BreakerChange::Probe {
            now: t(30),
            probe_until: t(9_000),
            reopens: 0,
        };
        assert!(gate.inner.breaker(&p, probe).await.unwrap());
        // A release of that probe, which the copy (closed) cannot take.
        let release = BreakerChange::Release {
            probe_until: t(9_000),
            until: t(60_000),
        };
        cache.update(&p, t(40), |s| release.apply(s)).await;
        // A change it can take, on top: still no read of the item.
        cache
            .update(&p, t(45), |s| BreakerChange::Close.apply(s).or(Some(*s)))
            .await;
        assert_eq!(gate.reads.load(Ordering::SeqCst), 1);
        let state = cache.state(&gate, &p, t(50)).await.unwrap();
        assert_eq!(gate.reads.load(Ordering::SeqCst), 2, "read within the TTL");
        assert_eq!(state, gate.inner.peek(&p), "the item as it is");
        assert!(state
            .breaker
            .is_some_and(|b| b.probe_until == Some(t(9_000))));
        // Read again: fresh for its TTL, and a change it takes keeps it fresh.
        let close = BreakerChange::Close;
        cache.update(&p, t(60), |s| close.apply(s)).await;
        let state = cache.state(&gate, &p, t(70)).await.unwrap();
        assert_eq!(gate.reads.load(Ordering::SeqCst), 2, "no read: fresh");
        assert_eq!(state.breaker, None);
    }

    #[test]
    fn a_probe_s_count_is_given_once_to_its_own_token() {
        let cache = GateCache::new(Duration::from_secs(5));
        let p = GatePartition::new(Channel::Push, "fcm");
        cache.probing(&p, t(100), 3);
        assert_eq!(cache.probed(&p, t(99)), None, "another probe's token");
        cache.probing(&p, t(200), 4);
        assert_eq!(cache.probed(&p, t(100)), None, "replaced by the next probe");
        assert_eq!(cache.probed(&p, t(200)), Some(4));
        assert_eq!(cache.probed(&p, t(200)), None, "taken once");
    }

    /// A gate that cannot be read: every call fails.
    struct Unreachable;

    impl crate::ports::Gate for Unreachable {
        async fn state(&self, _: &GatePartition) -> Result<GateState, PortError> {
            Err(down())
        }
        async fn throttle(&self, _: &GatePartition, _: Timestamp) -> Result<(), PortError> {
            Err(down())
        }
        async fn failed(&self, _: &GatePartition, _: Timestamp) -> Result<GateState, PortError> {
            Err(down())
        }
        async fn breaker(&self, _: &GatePartition, _: BreakerChange) -> Result<bool, PortError> {
            Err(down())
        }
    }

    fn down() -> PortError {
        PortError::Unavailable {
            op: crate::ports::gate::OP_GET,
            message: "the gate cannot be reached".into(),
        }
    }

    /// A read that failed leaves nothing in the cache: the next read asks the gate again (here
    /// one that answers, with nothing there).
    #[tokio::test(start_paused = true)]
    async fn a_failed_read_is_not_cached() {
        let p = GatePartition::new(Channel::Email, "ses:example.com");
        let cache = GateCache::new(Duration::from_secs(5));
        assert!(cache.closed_until(&Unreachable, &p, t(0)).await.is_err());
        let gate = MemoryGate::default();
        gate.throttle(&p, t(60_000)).await.unwrap();
        assert_eq!(
            cache.closed_until(&gate, &p, t(1)).await.unwrap(),
            Some(t(60_000))
        );
    }
}
