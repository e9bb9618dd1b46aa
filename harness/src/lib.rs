//! # reminders-harness — what tests the house, kept out of it
//!
//! The system checker, the embedded pipeline and the local runner: the CLI, the tests and the
//! benchmarks use them; no function links them (their dependencies, tokio's `test-util` among
//! them, stay out of every bootstrap). Each drives the library's real pipelines
//! ([`reminders_core`]) on its ports.
//!
//! | module | owns |
//! |---|---|
//! | [`chaos`] | the system checker: seeded worlds of faults, crashes and application and operator actions, judged against the promise |
//! | [`local`] | the local pipeline runner: schedule and event source mappings, played against an emulator |
//! | [`mapping`] | an SQS event source mapping, played once ([`mapping::Mapping`]): what the local runner, the chaos worlds, the simulation, the benchmarks and the tests poll with |
//! | [`around`] | [`around::Around`]: any port with a hook around each call; a fault plan ([`around::Faults`]), a latency ([`around::Latency`]), the simulation's meters, the chaos worlds' adapter models are hooks |
//! | [`sim`] | the embedded pipeline: real scheduler and consumer, virtual clock, simulated provider |
//! | [`stack`] | [`stack::MemoryStack`]: every port of a world in memory on one clock, with the handles a test looks at; the port set the pipelines run on |
//! | [`clock`], [`scripted`] | the virtual clock ([`ManualClock`]) and the provider that answers from a script ([`ScriptedProvider`]): the simulation's clock, and the tests' and benchmarks' |

pub mod around;
pub mod chaos;
pub mod clock;
pub mod local;
pub mod mapping;
pub mod scripted;
pub mod sim;
pub mod stack;

pub use clock::ManualClock;
pub use scripted::{Answer, ScriptedProvider};
pub use stack::MemoryStack;
