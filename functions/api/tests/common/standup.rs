//! The stand-up the series tests share: Monday 2027-01-04, 09:00 in Paris (08:00 UTC), a
//! series at 09:05, 09:10, 09:14 and 09:30 each day. The first three fall within the maker's
//! 15 minutes and are made by the PUT that creates it.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use reminders::clock::Timestamp;
use reminders_harness::ManualClock;
use serde_json::Value;

use super::{call, operator, series_body, Harness};

pub const NOW: &str = "2027-01-04T08:00:00Z";
pub const RULE: &str = "FREQ=DAILY;BYHOUR=9;BYMINUTE=5,10,14,30";

pub fn at(t: &str) -> Timestamp {
    Timestamp::parse_rfc3339(t).unwrap()
}

/// The stand-up's occurrence id at `instant` (`20270104T080500Z`).
pub fn occ(instant: &str) -> String {
    format!("standup::{instant}")
}

pub fn standup(subject: &str) -> Value {
    series_body("u-1", RULE, NOW, subject)
}

/// A harness at [`NOW`] with every request an operator's, and the stand-up created.
pub async fn created() -> (Harness, ManualClock, Value) {
    let clock = ManualClock::at(at(NOW));
    let h = Harness::at(clock.clone(), operator());
    let (status, answer) = call(
        &h.router,
        "PUT",
        "/v1/series/standup",
        Some(standup("Standup")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    (h, clock, answer)
}

pub async fn reminder(h: &Harness, id: &str) -> (StatusCode, Value) {
    call(&h.router, "GET", &format!("/v1/reminders/{id}"), None).await
}

/// The occurrences a series' view lists as made, by id, with their status.
pub fn made(view: &Value) -> BTreeMap<String, String> {
    view["occurrences"]
        .as_array()
        .unwrap_or_else(|| panic!("{view}"))
        .iter()
        .map(|o| {
            let id = o["reminder_id"].as_str().unwrap().to_owned();
            (id, o["status"].as_str().unwrap().to_owned())
        })
        .collect()
}

pub fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|o| o["reminder_id"].as_str().unwrap().to_owned())
        .collect()
}

pub fn series_ids(page: &Value) -> Vec<String> {
    page["series"]
        .as_array()
        .unwrap_or_else(|| panic!("{page}"))
        .iter()
        .map(|s| s["series_id"].as_str().unwrap().to_owned())
        .collect()
}
