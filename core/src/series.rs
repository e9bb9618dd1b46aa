//! Series (docs/design.md, "Recurring series"): making occurrences ahead, and editing and
//! cancelling a series, and its occurrences skipped, made or edited through their own ids (a
//! placeholder or a record on the series, which the maker finds).
//!
//! Every occurrence is made by a conditional create keyed by its id ([`occurrence_id`]), so a
//! crash, a retry or two makers at once make it once. The maker's and an edit's writes of the
//! series fence each other ([`ExpectedSeries::At`]: the version and how much was made); the one
//! that loses reconciles what it made with the series as stored. An edit or a cancel also
//! writes, itself, every occurrence a maker that read the old series could still make (those
//! due within [`MAKE_AHEAD`]): the new version's, or a cancelled placeholder where the new rule
//! makes none, so a late maker's create finds it there and writes nothing.
//!
//! A series in the zone `"subscriber"` makes each occurrence in the subscriber's own
//! `time_zone` as read (strongly) when the maker makes it: a traveller's 08:00 follows them.
//! Occurrences already made keep the zone they were made in.
//!
//! A missed occurrence (a stopped scheduler, an outage) is still made, due in the past: the
//! scheduler's next scan finds it stale and expires it with its reason; the next occurrence
//! goes at its own time, never bunched.
//!
//! | part | owns |
//! |---|---|
//! | `maker` | the scheduler's pass: [`make_due`], one series' [`make_one`], [`follow_zone`] |
//! | `change` | a series' `PUT` ([`put`]) and cancel ([`cancel`]), and why one is [`Refused`] |
//! | `detached` | an occurrence reached through its own id: [`skip_unmade`], [`put_unmade`], [`record_detached`] |
//! | `reconcile` | what both bring in line after a race: the [`affected`] instants, [`reconcile()`] |
//!
//! [`occurrence_id`]: crate::domain::series::occurrence_id
//! [`ExpectedSeries::At`]: crate::ports::series::ExpectedSeries::At
//! [`MAKE_AHEAD`]: crate::domain::series::MAKE_AHEAD

mod change;
mod detached;
mod maker;
mod reconcile;

pub use change::{cancel, put, Put, Refused};
pub use detached::{put_unmade, record_detached, skip_unmade, DetachRefused, Skipped};
pub use maker::{
    follow_zone, make_due, make_one, MakeReport, MAX_MADE_PER_PASS, MAX_SERIES_PER_RUN,
};
pub use reconcile::{affected, reconcile, MAX_AFFECTED};
