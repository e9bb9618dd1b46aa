//! A world's seed, and the random streams drawn from it. The seed enters a world once, at the
//! start of its run: its shape is drawn from it, and the world keeps it
//! ([`super::world::World::seed`]). Each part of the world that draws at random draws from a
//! stream named here ([`Stream`]), so that a part that draws more, or a new part with a stream
//! of its own, moves no other part's draws. (Its port calls still move the faults the dice draw
//! for every call after them, and the timing of everything else.)
//!
//! Each stream is the seed mixed with a salt. A salt changed changes every world: the seeds
//! `tests/chaos` replays and the figures in docs/performance.md were drawn with these. Two share
//! the salt 0: the shape and the consumer workers' own draws (push's first worker draws its
//! lease tokens from the shape's sequence). A new stream takes a salt no other stream uses. One
//! draw is keyed by what the world did rather than by a stream: whether an edit moves an SMS
//! number abroad, from the edit's moment and its subscriber (`surface.rs`).

use rand::rngs::StdRng;
use rand::SeedableRng;

use reminders_core::domain::Channel;

/// A world's seed (what `remindctl chaos --from` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seed(pub u64);

/// The world's random streams, each the seed mixed with its salt.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    /// The world's shape (its rates, its sizes) and its reminders.
    Shape,
    /// Which windows the world lines up ([`super::world::Windows`]).
    Windows,
    /// How each schedule hashes its due shards ([`super::world::SchedulerKey`]).
    SchedulerKeys,
    /// The faults at every port call ([`super::dice::Dice`], which splits it further).
    Dice,
    /// How long after its TTL the reminders table deletes an item.
    ReminderTtlLag,
    /// When each channel's provider is out.
    Outage,
    /// The newer version writing beside this one ([`super::newer::Newer`]).
    Newer,
    /// The application's edits at random moments.
    Edits,
    /// The application's edits that make a reminder fresh again by its freshness alone.
    FreshnessEdits,
    /// The application's answers to the windows' prompts.
    Prompted,
    /// Of those, the channels it lists again when a take-over prompts it.
    TakeOvers,
    /// Of those, the re-adds of a channel edited away.
    Readds,
    /// The subscribers changing their preferences.
    Preferences,
    /// Each subscriber's order of the channels before the clock starts.
    Orders,
    /// The series the application creates.
    SeriesCreated,
    /// The series that starts in the past.
    PastSeries,
    /// The application's edits of its series.
    SeriesEdits,
    /// Of those, the occurrences it moves on their own.
    SeriesMoves,
    /// The occurrences put before they are made.
    Detached,
    /// The two applications sharing a subscriber's lists.
    Cursors,
    /// The operator's cancels.
    Operator,
    /// The operator's redrives now and then: when and which.
    Redrives,
    /// Of those, the cancels made at the same moment.
    RedrivesCancels,
    /// The second operator redriving at the same time as the first (its own redriver, and its
    /// own draws of the two streams above).
    TwinRedriver,
    /// The lease tokens of an operator's redrive after a take-over.
    LaterRedrives,
    /// Each consumer worker's own draws (its lease tokens).
    Workers,
    /// How far each consumer worker's clock is off the world's.
    WorkerSkew,
}

impl Stream {
    fn salt(self) -> u64 {
        match self {
            Stream::Shape => 0,
            Stream::Windows => 0x3_21d0,
            Stream::SchedulerKeys => 0x36_0e4d,
            Stream::Dice => 0xc4a0_5eed,
            Stream::ReminderTtlLag => 0x7717_1a90,
            Stream::Outage => 0x07a6e,
            Stream::Newer => 0x4e_e3e5,
            Stream::Edits => 0xa991,
            Stream::FreshnessEdits => 0xf2e5_4a11,
            Stream::Prompted => 0x9_70a1,
            Stream::TakeOvers => 0x6_c1ea,
            Stream::Readds => 0x4_7c4a,
            Stream::Preferences => 0x5_ab5c,
            Stream::Orders => 0x0_4de5,
            Stream::SeriesCreated => 0x5e41e5,
            Stream::PastSeries => 0x0ed_afe7,
            Stream::SeriesEdits => 0x5e41_5a4f,
            Stream::SeriesMoves => 0x5e41_307e,
            Stream::Detached => 0xde7a_c4ed,
            Stream::Cursors => 0xc5_0e5,
            Stream::Operator => 0x0e7a,
            Stream::Redrives => 0x4ed4,
            Stream::RedrivesCancels => 0x1a7e4,
            Stream::TwinRedriver => 0x7317,
            Stream::LaterRedrives => 0x6_4ed4,
            Stream::Workers => 0,
            Stream::WorkerSkew => 0x5_4e3d,
        }
    }
}

impl Seed {
    /// The stream `stream` of this world.
    pub fn rng(self, stream: Stream) -> StdRng {
        StdRng::seed_from_u64(self.of(stream))
    }

    /// The seed of a part that draws on its own (the dice, a redriver's lease tokens).
    pub fn of(self, stream: Stream) -> u64 {
        self.0 ^ stream.salt()
    }

    /// A part's own seed taken as a world's: a second of the same part (the twin redriver).
    pub fn derived(self, stream: Stream) -> Seed {
        Seed(self.of(stream))
    }

    /// The seed of worker `n` of `channel` (its lease tokens; with [`Stream::WorkerSkew`],
    /// how far its clock is off).
    pub fn worker(self, stream: Stream, channel: Channel, n: u32) -> u64 {
        self.of(stream) ^ (u64::from(n) << 8) ^ channel as u64
    }

    /// Whether this world is one of the third with a newer version writing beside it.
    pub fn with_a_newer_writer(self) -> bool {
        self.0 % 3 == 1
    }
}
