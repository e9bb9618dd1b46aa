//! A schedule's share of the due index, and its part of the per-subscriber cap: `N`
//! schedules split the 64 virtual shards without overlap or gap, and the cap one subscriber
//! gets a minute holds across all of them (docs/design.md, "Scheduler shares" and "Per-subscriber
//! cap").

use serde::Serialize;

use super::config;

/// A share of the virtual shards: schedule `index` of `of` reads the shards `s` with
/// `s % of == index`, so `of` schedules split the index without overlap or gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Share {
    #[serde(rename = "share")]
    pub index: u32,
    #[serde(rename = "shares")]
    pub of: u32,
}

impl Default for Share {
    fn default() -> Self {
        Self { index: 0, of: 1 }
    }
}

impl Share {
    pub fn new(index: u32, of: u32) -> Result<Self, String> {
        if !(1..=config::MAX_PARALLELISM).contains(&of) {
            return Err(format!(
                "shares: must be 1 to {}, not {of}",
                config::MAX_PARALLELISM
            ));
        }
        if index >= of {
            return Err(format!("share: must be below shares ({of}), not {index}"));
        }
        Ok(Self { index, of })
    }

    /// The share a schedule's input names: `{"share": i, "shares": n}`; any other JSON (a
    /// manual invocation, an older schedule) is the whole index.
    pub fn from_event(event: &serde_json::Value) -> Result<Self, String> {
        match (event.get("share"), event.get("shares")) {
            (None, None) => Ok(Self::default()),
            (i, n) => {
                let num = |v: Option<&serde_json::Value>, name: &str| {
                    v.and_then(serde_json::Value::as_u64)
                        .and_then(|v| u32::try_from(v).ok())
                        .ok_or_else(|| format!("{name}: must be a whole number"))
                };
                Self::new(num(i, "share")?, num(n, "shares")?)
            }
        }
    }

    pub fn owns(&self, shard: u32) -> bool {
        shard % self.of.max(1) == self.index
    }

    /// This share's part of a per-subscriber cap that holds across all `of` shares in one
    /// run. A subscriber's reminders hash over every shard, so each share takes at most
    /// `cap / of` of them, and the `cap % of` units left over go to a different set of shares
    /// each run (`run` counts the runs, one a minute): the shares' parts add up to `cap`
    /// every run. A part is never 0, so a cap below the number of shares is raised to it
    /// (a share that could take nothing would hold a subscriber's only reminder back).
    pub fn cap_part(&self, cap: u32, run: u64) -> u32 {
        let of = self.of.max(1);
        let base = cap / of;
        let turn = ((u64::from(self.index) + run) % u64::from(of)) as u32;
        let extra = u32::from(turn < cap % of);
        (base + extra).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caps_parts_add_up_to_the_cap_every_run() {
        for of in 1..=config::MAX_PARALLELISM {
            for cap in 1..=250 {
                for run in 0..u64::from(of) * 2 {
                    let parts: Vec<u32> = (0..of)
                        .map(|i| Share::new(i, of).unwrap().cap_part(cap, run))
                        .collect();
                    let sum: u32 = parts.iter().sum();
                    assert_eq!(sum, cap.max(of), "cap {cap} over {of} shares, run {run}");
                    assert!(parts.iter().all(|p| *p >= 1));
                }
            }
        }
        // The whole index in one share keeps the cap as configured.
        assert_eq!(Share::default().cap_part(100, 7), 100);
    }
}
