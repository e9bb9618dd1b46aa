//! A world's shape, drawn from its seed: how many reminders and workers, the faults' rates,
//! the providers' misbehaviour, the windows it lines up, the keys its schedules hash with.

use rand::rngs::StdRng;
use rand::RngExt;

use super::dice::Rates;
use super::provider::Misbehaviour;
use super::seed::{Seed, Stream};
use reminders_core::domain::PerChannel;
use reminders_core::ports::StaleHandles;

/// The world's shape, drawn from its seed.
pub(super) struct Shape {
    pub reminders: u32,
    pub idempotent: PerChannel<bool>,
    pub workers: u32,
    pub twin_scheduler: bool,
    pub visibility_secs: u32,
    pub max_receive_count: u32,
    pub rates: Rates,
    pub misbehaviour: Misbehaviour,
    pub ops: u32,
    /// What an older receipt handle does (SQS promises neither): half the worlds each.
    pub stale_handles: StaleHandles,
    /// Two operators redrive at once.
    pub twin_redrive: bool,
    /// How long after its TTL the ledger's items go (DynamoDB deletes them some time after).
    pub ttl_lag_secs: i64,
    /// The moments where two features meet (`Windows`), drawn apart so that the rest of a seed's
    /// shape stays what it was.
    pub windows: Windows,
    /// The key each schedule (the first, the twin) hashes sole channels' addresses with: a
    /// deploy in progress mixes messages the consumers read once, read twice, and claim only
    /// to give back (drawn apart too).
    pub scheduler_keys: [SchedulerKey; 2],
}

/// What a schedule hashes a sole channel's address with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SchedulerKey {
    /// The consumers' key: the one-read path.
    Same,
    /// Another (rotated) key: the hash names another address; the claim is given back.
    Other,
    /// None: the previous release, or a key it could not read: the two-read path.
    None,
}

impl SchedulerKey {
    /// Half the schedules hash as the consumers do; the rest split between the others.
    pub(super) fn draw(seed: Seed) -> [Self; 2] {
        let mut rng = seed.rng(Stream::SchedulerKeys);
        let mut one = || match rng.random_range(0..4) {
            0 | 1 => Self::Same,
            2 => Self::Other,
            _ => Self::None,
        };
        [one(), one()]
    }
}

/// Moments where two features meet, which random timing alone rarely lines up.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Windows {
    /// An address whose attempt was ambiguous answers `410` at its next, and every
    /// subscriber starts with a fallback order of the three channels.
    pub gone_after_ambiguous: bool,
    /// The application edits a stale reminder fresh again while the scheduler holds the
    /// page it read it in; and the schedule stops for a while (a deploy, a disabled rule), so
    /// that the scheduler comes back to a backlog gone stale.
    pub edit_in_scan: bool,
    /// When the schedule stops and for how long (seconds from the start).
    pub paused: (u64, u64),
    /// After a death that falls back but names no channel, the application adds the
    /// order's missing channels and the operator redrives that DLQ soon after.
    pub add_after_death: bool,
    /// A worker stops right after a provider accepted its send, and the application moves
    /// the reminder past the ledger's horizon meanwhile.
    pub edit_after_accept: bool,
    /// The gate's probe writes are slow, and when a breaker opens the application shortens
    /// a waiting reminder's freshness to end just after the cool-down.
    pub probe_near_end: bool,
    /// Two or three recurring series, edited, skipped and cancelled mid-flight.
    pub series: bool,
    /// An edit that took a channel away from an enqueued reminder is followed, minutes later,
    /// by one that lists it again (the API refuses it with `409`).
    pub readd_after_remove: bool,
    /// Every subscriber orders the three channels from the start, and at each first claim
    /// of a chain's head moves that channel to the end of the order, before it sends and
    /// before the next channel looks again.
    pub reorder_after_claim: bool,
    /// Every subscriber orders the channels from the start; the provider answers `503` to
    /// every call to each subscriber's head address until the operator fixes it: a
    /// head dies with its budget spent on answers that surely sent nothing, its standby is
    /// not needed; the subscriber then opts out of that channel and the operator redrives
    /// it, and it dies again, handing on.
    pub spent_then_fallback: bool,
}

impl Windows {
    /// The worlds where heads die out of budget deploy their own retry policy and freshness:
    /// not in the worlds of almost-stale probes, whose probes start near the end of a freshness the
    /// application cuts.
    fn apart(mut self) -> Self {
        self.spent_then_fallback &= !self.probe_near_end;
        self
    }

    pub(super) fn draw(seed: Seed) -> Self {
        let mut rng = seed.rng(Stream::Windows);
        Self {
            gone_after_ambiguous: rng.random_bool(0.5),
            edit_in_scan: rng.random_bool(0.5),
            edit_after_accept: rng.random_bool(0.5),
            paused: (rng.random_range(300..900), rng.random_range(480..1_200)),
            add_after_death: rng.random_bool(0.5),
            probe_near_end: rng.random_bool(0.5),
            series: rng.random_bool(0.5),
            readd_after_remove: rng.random_bool(0.5),
            reorder_after_claim: rng.random_bool(0.5),
            spent_then_fallback: rng.random_bool(0.5),
        }
        .apart()
    }
}

impl Shape {
    pub(super) fn draw(rng: &mut StdRng) -> Self {
        let mut rate = |max: f64| rng.random_range(0.0..max);
        let rates = Rates {
            latency: rate(0.1),
            fail_before: rate(0.05),
            throttle: rate(0.03),
            crash: rate(0.02),
            lost_response: rate(0.05),
            duplicate: rate(0.1),
        };
        let misbehaviour = Misbehaviour {
            throttle: rate(0.15),
            transient: rate(0.15),
            permanent: rate(0.03),
            accept_then_drop: rate(0.08),
            slow: rate(0.05),
            gone: rate(0.04),
        };
        Self {
            reminders: rng.random_range(4..16),
            idempotent: PerChannel::from_fn(|_| rng.random_bool(0.5)),
            workers: rng.random_range(1..4),
            twin_scheduler: rng.random_bool(0.5),
            // Sometimes shorter than the work: a second worker gets the same message.
            visibility_secs: if rng.random_bool(0.3) { 20 } else { 180 },
            // The template's lowest maxReceiveCount (20), or its default.
            max_receive_count: if rng.random_bool(0.3) { 20 } else { 100 },
            rates,
            misbehaviour,
            ops: rng.random_range(0..6),
            stale_handles: if rng.random_bool(0.5) {
                StaleHandles::Act
            } else {
                StaleHandles::Ignored
            },
            twin_redrive: rng.random_bool(0.3),
            ttl_lag_secs: rng.random_range(0..600),
            windows: Windows::default(),
            scheduler_keys: [SchedulerKey::Same; 2],
        }
    }
}
