pub mod rule;

pub use rule::{Freq, Rule, RuleError};
pub mod definition;
mod occurrence_id;

pub use definition::{
    NewSeries, Series, SeriesError, SeriesStatus, MADE_KEPT, MAKE_AHEAD, MAX_DETACHED,
    MAX_SERIES_ID_LEN, SUBSCRIBER_ZONE,
};
pub use occurrence_id::{occurrence_id, occurrence_of, OCCURRENCE_SEPARATOR};
