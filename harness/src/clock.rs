//! Virtual time for the simulation and the tests: a [`Clock`] that moves only when advanced,
//! set, or slept on (a sleep returns at once, the time advanced by it). The chaos worlds run on
//! tokio's paused clock instead (`chaos::VirtualClock`).

use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reminders_core::clock::{Clock, Timestamp};

/// Virtual time: starts where it is told and moves only when advanced or slept on.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn at(start: Timestamp) -> Self {
        Self(Arc::new(AtomicI64::new(start.as_millis())))
    }
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.as_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.0.load(Ordering::SeqCst))
    }
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
        self.advance(d);
        std::future::ready(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_clock_sleep_advances_virtual_time() {
        let clock = ManualClock::at(Timestamp::from_millis(10));
        clock.sleep(Duration::from_secs(2)).await;
        assert_eq!(clock.now(), Timestamp::from_millis(2_010));
    }
}
