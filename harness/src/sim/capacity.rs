//! DynamoDB's throughput as the stack meets it: each call is admitted in the virtual second it
//! lands in if its partition and its table have room ([`limits::dynamo`]), and a throttled
//! call is retried as the SDK retries it ([`limits::sdk`]): after a jittered exponential
//! backoff, three attempts in all, then the caller gets `Throttled` and handles it as it
//! would on AWS. The caller pays the waits in time (the scheduler's run clock, the consumer's
//! batch).
//!
//! Tables: the reminders table (keys spread: its table-level throughput is the limit), its
//! due index (one partition key per `due_shard`: 1,000 writes a second each) and the ledger.
//! On demand, a table takes twice its previous peak (a new one 4,000 writes and 12,000 reads
//! a second, or a linear combination); provisioned, what is provisioned.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

use super::limits::{dynamo as ddb, sdk};
use super::seed::Stream;

/// How the tables are billed (the template deploys on demand).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum TableMode {
    /// A new on-demand table: 4,000 writes and 12,000 reads a second, twice any peak held
    /// for 30 minutes.
    OnDemand,
    /// Provisioned (or an on-demand table warmed to it): these units a second, per table and
    /// per index.
    Provisioned { writes: u32, reads: u32 },
}

impl TableMode {
    pub fn describe(&self) -> String {
        match self {
            TableMode::OnDemand => "on-demand".into(),
            TableMode::Provisioned { writes, reads } => {
                format!("provisioned {writes} WCU / {reads} RCU")
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    Reminders,
    DueIndex,
    Ledger,
}

pub const TABLES: [Table; 3] = [Table::Reminders, Table::DueIndex, Table::Ledger];

/// What one table saw over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TableStats {
    /// The busiest second's share of the limit that bound it (table or partition).
    pub peak_utilisation: f64,
    /// Attempts refused (each retried attempt counts, as CloudWatch's ThrottledRequests).
    pub throttles: u64,
    /// Calls that failed after the SDK's last attempt.
    pub failed_calls: u64,
    /// Seconds with at least one throttle.
    pub throttled_secs: u64,
    /// The partition key that throttled most (the due index's shard), if any.
    pub hottest_key: Option<u64>,
}

#[derive(Default)]
struct TableState {
    /// (reads, writes) per second, and per (second, partition key).
    used: BTreeMap<i64, (f64, f64)>,
    keys: BTreeMap<(i64, u64), (f64, f64)>,
    /// The peak of seconds older than the on-demand window: what the table now takes twice of.
    settled_peak: (f64, f64),
    latest: i64,
    throttled: BTreeSet<i64>,
    by_key: BTreeMap<u64, u64>,
    stats: TableStats,
}

/// The modelled DynamoDB: one per simulation, shared by the scheduler and the consumer.
pub struct Dynamo {
    mode: TableMode,
    state: Mutex<(BTreeMap<Table, TableState>, StdRng)>,
}

impl Dynamo {
    /// Tables in `mode`, their throttling drawn from the simulation seeded with `seed` (its
    /// stream [`Stream::Dynamo`]).
    pub fn new(mode: TableMode, seed: u64) -> Self {
        Self {
            mode,
            state: Mutex::new((
                BTreeMap::new(),
                StdRng::seed_from_u64(Stream::Dynamo.of(seed)),
            )),
        }
    }

    /// One call of `reads`/`writes` units on `table` (partition `key`, when one key is hot by
    /// design) at `at_ms`: the time its retries waited, or `Err` once the SDK gives up.
    pub fn call(
        &self,
        table: Table,
        key: Option<u64>,
        reads: f64,
        writes: f64,
        at_ms: i64,
    ) -> Result<f64, f64> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tables, rng) = &mut *guard;
        let st = tables.entry(table).or_default();
        let mut waited = 0.0;
        for attempt in 1..=sdk::MAX_ATTEMPTS {
            let second = (at_ms + waited as i64).div_euclid(1_000);
            if st.admit(self.mode, second, key, reads, writes) {
                return Ok(waited);
            }
            st.stats.throttles += 1;
            if st.throttled.insert(second) {
                st.stats.throttled_secs += 1;
            }
            if let Some(k) = key {
                *st.by_key.entry(k).or_default() += 1;
            }
            if attempt < sdk::MAX_ATTEMPTS {
                let cap = (sdk::INITIAL_BACKOFF_MS * f64::from(1u32 << (attempt - 1)))
                    .min(sdk::MAX_BACKOFF_MS);
                waited += rng.random_range(0.0..cap);
            }
        }
        st.stats.failed_calls += 1;
        Err(waited)
    }

    pub fn stats(&self, table: Table) -> TableStats {
        let guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        guard.0.get(&table).map_or_else(TableStats::default, |st| {
            let mut s = st.stats.clone();
            s.hottest_key = st.by_key.iter().max_by_key(|(_, n)| **n).map(|(k, _)| *k);
            s
        })
    }
}

impl TableState {
    fn limits(&self, mode: TableMode) -> (f64, f64) {
        match mode {
            TableMode::OnDemand => {
                let (r, w) = self.settled_peak;
                (
                    (2.0 * r).clamp(
                        ddb::ON_DEMAND_START_READS_PER_SEC,
                        ddb::TABLE_QUOTA_UNITS_PER_SEC,
                    ),
                    (2.0 * w).clamp(
                        ddb::ON_DEMAND_START_WRITES_PER_SEC,
                        ddb::TABLE_QUOTA_UNITS_PER_SEC,
                    ),
                )
            }
            TableMode::Provisioned { writes, reads } => (
                f64::from(reads).min(ddb::TABLE_QUOTA_UNITS_PER_SEC),
                f64::from(writes).min(ddb::TABLE_QUOTA_UNITS_PER_SEC),
            ),
        }
    }

    /// Take the units in `second` if table and partition have room.
    fn admit(&mut self, mode: TableMode, second: i64, key: Option<u64>, r: f64, w: f64) -> bool {
        self.settle(second);
        let (lr, lw) = self.limits(mode);
        let (tr, tw) = self.used.get(&second).copied().unwrap_or_default();
        // On demand and a partition take a linear combination of reads and writes;
        // provisioned reads and writes are separate budgets.
        let table_use = match mode {
            TableMode::OnDemand => (tr + r) / lr + (tw + w) / lw,
            TableMode::Provisioned { .. } => ((tr + r) / lr).max((tw + w) / lw),
        };
        let (kr, kw) = key
            .and_then(|k| self.keys.get(&(second, k)).copied())
            .unwrap_or_default();
        let key_use = key.map_or(0.0, |_| {
            (kr + r) / ddb::PARTITION_READS_PER_SEC + (kw + w) / ddb::PARTITION_WRITES_PER_SEC
        });
        // A call that alone exceeds nothing but rounding is let through.
        if table_use > 1.0 + 1e-9 || key_use > 1.0 + 1e-9 {
            return false;
        }
        let u = self.used.entry(second).or_default();
        u.0 += r;
        u.1 += w;
        if let Some(k) = key {
            let e = self.keys.entry((second, k)).or_default();
            e.0 += r;
            e.1 += w;
        }
        self.stats.peak_utilisation = self.stats.peak_utilisation.max(table_use.max(key_use));
        true
    }

    /// Fold seconds older than the on-demand window into the settled peak, and forget
    /// partition counts no call can land in any more.
    fn settle(&mut self, second: i64) {
        if second <= self.latest {
            return;
        }
        self.latest = second;
        let horizon = second - ddb::ON_DEMAND_PEAK_WINDOW_SECS;
        while let Some((&s, &(r, w))) = self.used.first_key_value() {
            if s >= horizon {
                break;
            }
            self.settled_peak.0 = self.settled_peak.0.max(r);
            self.settled_peak.1 = self.settled_peak.1.max(w);
            self.used.remove(&s);
        }
        // The scheduler runs up to a minute ahead of the consumer's calls.
        let keep = second - 300;
        while let Some((&(s, k), _)) = self.keys.first_key_value() {
            if s >= keep {
                break;
            }
            self.keys.remove(&(s, k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_takes_a_thousand_writes_a_second_then_the_sdk_backs_off() {
        let d = Dynamo::new(TableMode::OnDemand, 1);
        for _ in 0..1_000 {
            assert_eq!(d.call(Table::DueIndex, Some(0), 0.0, 1.0, 0), Ok(0.0));
        }
        // The 1,001st waits for a later second (or fails after three attempts).
        match d.call(Table::DueIndex, Some(0), 0.0, 1.0, 0) {
            Ok(waited) => assert!(waited > 0.0),
            Err(waited) => assert!(waited < 3_000.0),
        }
        // Another shard is another partition.
        assert_eq!(d.call(Table::DueIndex, Some(1), 0.0, 1.0, 0), Ok(0.0));
        let s = d.stats(Table::DueIndex);
        assert!(s.throttles >= 1 && s.throttled_secs >= 1, "{s:?}");
        assert_eq!(s.hottest_key, Some(0));
    }

    #[test]
    fn a_new_on_demand_table_takes_four_thousand_writes_then_twice_its_settled_peak() {
        let d = Dynamo::new(TableMode::OnDemand, 1);
        let fill = |second: i64| {
            (0..10_000)
                .filter(|_| {
                    d.call(Table::Ledger, None, 0.0, 1.0, second * 1_000)
                        .is_ok_and(|w| w == 0.0)
                })
                .count()
        };
        assert_eq!(fill(0), 4_000);
        // Half an hour after a peak of 4,000, the table takes 8,000.
        assert_eq!(fill(ddb::ON_DEMAND_PEAK_WINDOW_SECS + 1), 8_000);
        let p = Dynamo::new(
            TableMode::Provisioned {
                writes: 20_000,
                reads: 1,
            },
            1,
        );
        let admitted = (0..30_000)
            .filter(|_| p.call(Table::Ledger, None, 0.0, 1.0, 0) == Ok(0.0))
            .count();
        assert_eq!(admitted, 20_000);
    }
}
