//! The simulation's seed (`SimConfig::seed`, `--seed`), and the random streams drawn from it.
//! The seed enters the simulation once, in its configuration; each part that draws at random
//! is handed that seed and draws from a stream of it named here ([`Stream`]): the seed mixed
//! with the stream's salt. A part that draws more moves no other stream's draws (two streams
//! are one sequence, below).
//!
//! A salt changed changes every simulated run: the demo's report with `--seed 7`, the figures
//! in docs/performance.md and the planner's answers were drawn with these. Two share the salt
//! 0, as they did before the streams were named: the provider's answers and the consumer's own
//! draws (its lease tokens and backoff jitter) run the same sequence, each for its own use.
//! Giving one a salt of its own would redraw every simulated run (and the figures above). A
//! new stream takes a salt no other stream uses.

/// The simulation's random streams.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    /// The reminders of the load: their due times, subscribers and addresses (`load.rs`).
    Load,
    /// DynamoDB's throttling as modelled (`capacity.rs`).
    Dynamo,
    /// The consumer's DynamoDB calls' latency (`metered.rs`).
    ConsumerCalls,
    /// The scheduler's calls' latency, on its run clock (`latency.rs`).
    SchedulerCalls,
    /// The simulated provider's answers (`provider.rs`).
    Provider,
    /// The consumer's own draws (its lease tokens, its backoff jitter).
    Consumer,
}

impl Stream {
    fn salt(self) -> u64 {
        match self {
            Stream::Load => 0x5eed,
            Stream::Dynamo => 0xddb,
            Stream::ConsumerCalls => 0xba7c,
            Stream::SchedulerCalls => 0x1a7e,
            Stream::Provider => 0,
            Stream::Consumer => 0,
        }
    }

    /// This stream's seed in the simulation seeded with `seed`.
    pub fn of(self, seed: u64) -> u64 {
        seed ^ self.salt()
    }
}
