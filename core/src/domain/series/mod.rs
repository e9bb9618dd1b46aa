pub mod rule;

pub use rule::{Freq, Rule, RuleError};
pub mod definition;

pub use definition::{
    occurrence_id, occurrence_of, NewSeries, Series, SeriesError, SeriesStatus, MADE_KEPT,
    MAKE_AHEAD, MAX_DETACHED, MAX_SERIES_ID_LEN, OCCURRENCE_SEPARATOR, SUBSCRIBER_ZONE,
};
