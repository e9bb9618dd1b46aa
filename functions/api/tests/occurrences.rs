//! One occurrence of a series through its own reminder id (`{series}::{instant}`), before the
//! series made it: a DELETE skips it (the maker, run later, finds it cancelled), a PUT creates
//! it detached from later edits of the series; an id that reads as an occurrence and is none
//! is refused. On the stand-up of `common::standup`, on a clock the test moves.

mod common;

use axum::http::StatusCode;
use common::standup::{at, created, made, occ, reminder, standup};
use common::{body, call};
use serde_json::json;

/// The maker's run at `now`, as the scheduler runs it; every series made without failure.
async fn make(
    h: &common::Harness,
    now: reminders::clock::Timestamp,
) -> reminders::series::MakeReport {
    let report =
        reminders::series::make_due(&h.store, &h.ledger, now, common::defaults().retention).await;
    assert_eq!(report.failed, 0, "{report:?}");
    report
}

#[tokio::test]
async fn deleting_an_occurrence_not_yet_made_skips_it_and_the_maker_leaves_it_cancelled() {
    let (h, clock, _) = created().await;
    let skipped = occ("20270105T081000Z");
    let uri = format!("/v1/reminders/{skipped}");
    let (status, skip) = call(&h.router, "DELETE", &uri, None).await;
    assert_eq!(status, StatusCode::OK, "{skip}");
    assert_eq!(skip["reminder_id"], skipped.as_str());
    assert_eq!(skip["series_id"], "standup");
    assert_eq!(skip["status"], "cancelled");
    assert_eq!(
        skip["channels"],
        json!({"email": "cancelled", "sms": "cancelled"})
    );
    let (_, r) = reminder(&h, &skipped).await;
    assert_eq!(r["status"], "cancelled", "{r}");
    let (status, again) = call(&h.router, "DELETE", &uri, None).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["status"], "cancelled");
    // An instant the rule does not produce, or a series there is none of: nothing to skip.
    for id in [
        occ("20270105T081100Z"),
        "nosuch::20270105T081000Z".to_owned(),
    ] {
        let (status, answer) =
            call(&h.router, "DELETE", &format!("/v1/reminders/{id}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id}: {answer}");
        assert!(h.stored(&id).await.is_none(), "{id}");
    }

    // The maker, the next day: it finds the skipped one there and makes its neighbours.
    let report = reminders::series::make_due(
        &h.store,
        &h.ledger,
        at("2027-01-05T08:00:00Z"),
        common::defaults().retention,
    )
    .await;
    assert_eq!((report.series, report.failed), (1, 0), "{report:?}");
    assert!(report.made >= 2 && report.existed >= 1, "{report:?}");
    let (_, r) = reminder(&h, &skipped).await;
    assert_eq!(r["status"], "cancelled", "{r}");
    let (_, neighbour) = reminder(&h, &occ("20270105T080500Z")).await;
    assert_eq!(
        neighbour["status"], "scheduled",
        "made by the maker: {neighbour}"
    );
    let (_, view) = call(&h.router, "GET", "/v1/series/standup", None).await;
    assert_eq!(
        made(&view).get(&skipped).map(String::as_str),
        Some("cancelled"),
        "{view}"
    );
    // An edit then: the skipped one stays cancelled, its neighbour follows.
    clock.set(at("2027-01-05T08:01:00Z"));
    let b = standup("Standup, day 2");
    let (status, edited) = call(&h.router, "PUT", "/v1/series/standup", Some(b)).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    let (_, r) = reminder(&h, &skipped).await;
    assert_eq!(r["status"], "cancelled", "{r}");
    assert_eq!(r["content"]["subject"], "Standup", "{r}");
    let (_, neighbour) = reminder(&h, &occ("20270105T080500Z")).await;
    assert_eq!(
        neighbour["content"]["subject"], "Standup, day 2",
        "{neighbour}"
    );
}

#[tokio::test]
async fn putting_an_occurrence_on_its_own_detaches_it_from_later_edits() {
    let (h, clock, _) = created().await;
    // Not made yet: created now from the body, detached.
    let alone = occ("20270105T081000Z");
    let mut b = body("u-1", "Alone");
    b["due_at"] = json!("2027-01-05T08:10:00Z");
    let (status, put) = call(&h.router, "PUT", &format!("/v1/reminders/{alone}"), Some(b)).await;
    assert_eq!(status, StatusCode::CREATED, "{put}");
    assert_eq!(put["content"]["subject"], "Alone");
    assert_eq!(put["due_at"], "2027-01-05T08:10:00.000Z");
    let stored = h.stored(&alone).await.unwrap();
    assert!(stored.detached, "{stored:?}");
    // Made already: edited as any reminder, and detached.
    let edited_alone = occ("20270104T081400Z");
    let mut b = body("u-1", "Edited alone");
    b["due_at"] = json!("2027-01-04T08:14:00Z");
    let (status, put) = call(
        &h.router,
        "PUT",
        &format!("/v1/reminders/{edited_alone}"),
        Some(b),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{put}");
    assert_eq!(put["payload_version"], 2);
    assert!(h.stored(&edited_alone).await.unwrap().detached);

    // A series edit now, and another the next day once the detached one is due soon:
    // both leave them as their PUTs wrote them, and the others follow.
    let (status, _) = call(
        &h.router,
        "PUT",
        "/v1/series/standup",
        Some(standup("Standup v2")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, r) = reminder(&h, &edited_alone).await;
    assert_eq!(r["content"]["subject"], "Edited alone", "{r}");
    let (_, r) = reminder(&h, &occ("20270104T080500Z")).await;
    assert_eq!(r["content"]["subject"], "Standup v2", "{r}");
    clock.set(at("2027-01-05T08:00:00Z"));
    let (status, _) = call(
        &h.router,
        "PUT",
        "/v1/series/standup",
        Some(standup("Standup v3")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    make(&h, at("2027-01-05T08:00:00Z")).await;
    let (_, r) = reminder(&h, &alone).await;
    assert_eq!(r["status"], "scheduled", "{r}");
    assert_eq!(r["content"]["subject"], "Alone", "{r}");
    assert_eq!(r["payload_version"], 1, "{r}");
    let (_, r) = reminder(&h, &occ("20270105T080500Z")).await;
    assert_eq!(r["content"]["subject"], "Standup v3", "{r}");
}

/// An id with the separator is an occurrence's, of a series the caller reaches, or refused.
#[tokio::test]
async fn a_put_of_an_id_that_reads_as_an_occurrence_and_is_none_is_refused_naming_id() {
    let (h, _clock, _) = created().await;
    let due = |t: &str| {
        let mut b = body("u-1", "Pickup");
        b["due_at"] = json!(t);
        b
    };
    let cases = [
        ("x::y".to_owned(), due("2030-01-01T10:00:00Z")),
        // An instant the rule does not produce.
        (occ("20270105T081100Z"), due("2027-01-05T08:11:00Z")),
        // No such series.
        (
            "nosuch::20270105T081000Z".to_owned(),
            due("2027-01-05T08:10:00Z"),
        ),
        // Another subscriber's body.
        (occ("20270106T080500Z"), {
            let mut b = due("2027-01-06T08:05:00Z");
            b["subscriber_id"] = json!("u-2");
            b
        }),
    ];
    for (id, b) in cases {
        let (status, answer) =
            call(&h.router, "PUT", &format!("/v1/reminders/{id}"), Some(b)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{id}: {answer}");
        assert_eq!(answer["error"]["field"], "id", "{id}: {answer}");
        assert!(h.stored(&id).await.is_none(), "{id}: nothing stored");
    }
}

// Found while writing these tests: the non-test code answers otherwise (see the reason).

#[tokio::test]
async fn cancelling_a_series_cancels_an_occurrence_put_on_its_own_before_it_was_made() {
    let (h, _clock, _) = created().await;
    let alone = occ("20270105T081000Z");
    let mut b = body("u-1", "Alone");
    b["due_at"] = json!("2027-01-05T08:10:00Z");
    let (status, put) = call(&h.router, "PUT", &format!("/v1/reminders/{alone}"), Some(b)).await;
    assert_eq!(status, StatusCode::CREATED, "{put}");
    let (status, cancel) = call(&h.router, "DELETE", "/v1/series/standup", None).await;
    assert_eq!(status, StatusCode::OK, "{cancel}");
    let (_, r) = reminder(&h, &alone).await;
    assert_eq!(r["status"], "cancelled", "an occurrence not yet sent: {r}");
}

/// An occurrence put on its own, moved earlier, sent, and gone with its TTL (its reminder
/// item and ledger item expire together): the maker reaching its instant never makes it again,
/// and neither does a series edit made while the instant is still ahead.
#[tokio::test]
async fn an_occurrence_put_on_its_own_is_never_made_again_once_its_ttl_took_it() {
    use reminders::ports::Eraser;
    let (h, clock, _) = created().await;
    let alone = occ("20270105T081000Z");
    let mut b = body("u-1", "Moved earlier");
    b["due_at"] = json!("2027-01-04T08:20:00Z");
    let (status, put) = call(&h.router, "PUT", &format!("/v1/reminders/{alone}"), Some(b)).await;
    assert_eq!(status, StatusCode::CREATED, "{put}");
    // Sent at 08:20 today; its TTL then takes it (as DynamoDB's would, days later).
    let id = reminders::domain::ReminderId::parse(&alone).unwrap();
    h.store.delete_reminder(&id, true).await.unwrap();
    assert!(h.stored(&alone).await.is_none());
    // The next morning, a series edit while the instant is minutes ahead, then the maker.
    clock.set(at("2027-01-05T08:00:00Z"));
    let (status, _) = call(
        &h.router,
        "PUT",
        "/v1/series/standup",
        Some(standup("Standup v2")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        h.stored(&alone).await.is_none(),
        "the edit made the occurrence again: a second send"
    );
    let report = make(&h, at("2027-01-05T08:00:00Z")).await;
    assert!(
        h.stored(&alone).await.is_none(),
        "the maker made the occurrence again: a second send ({report:?})"
    );
    let (_, neighbour) = reminder(&h, &occ("20270105T080500Z")).await;
    assert_eq!(neighbour["content"]["subject"], "Standup v2", "{neighbour}");
}

/// A `PUT` of an occurrence not yet made whose write to the series failed (a 503, a crash, a
/// series that kept changing), retried by the client: the series' cancel still reaches it
/// wherever it was moved, and it is never sent after the cancel.
#[tokio::test]
async fn a_cancel_reaches_an_occurrence_put_on_its_own_whose_first_try_failed() {
    use reminders::ports::FaultPoint;
    let (h, _clock, _) = created().await;
    let alone = occ("20270105T081000Z");
    let mut b = body("u-1", "Moved later");
    b["due_at"] = json!("2027-01-09T08:10:00Z");
    let uri = format!("/v1/reminders/{alone}");
    h.store_faults().fail(
        reminders::ports::series::OP_PUT_SERIES,
        FaultPoint::Before,
        1,
    );
    let (status, first) = call(&h.router, "PUT", &uri, Some(b.clone())).await;
    assert!(status.is_server_error(), "{status}: {first}");
    let (status, again) = call(&h.router, "PUT", &uri, Some(b)).await;
    assert!(status.is_success(), "{status}: {again}");
    let (status, cancel) = call(&h.router, "DELETE", "/v1/series/standup", None).await;
    assert_eq!(status, StatusCode::OK, "{cancel}");
    let (_, r) = reminder(&h, &alone).await;
    assert_eq!(
        r["status"], "cancelled",
        "left to be sent after the cancel: {r}"
    );
}

/// An occurrence put on its own and moved days later, then thousands of occurrences made
/// since (more than the series remembers of what it made): the cancel still reaches it.
#[tokio::test]
async fn a_cancel_reaches_an_occurrence_put_on_its_own_however_many_were_made_since() {
    let (h, clock, _) = created().await;
    let hours: Vec<String> = (0..24).map(|h| h.to_string()).collect();
    let minutes: Vec<String> = (0..60).map(|m| m.to_string()).collect();
    let every_minute = format!(
        "FREQ=DAILY;BYHOUR={};BYMINUTE={}",
        hours.join(","),
        minutes.join(",")
    );
    let mut minutely = common::series_body("u-1", &every_minute, common::standup::NOW, "Tick");
    minutely["fresh_for_secs"] = json!(60);
    let (status, answer) = call(&h.router, "PUT", "/v1/series/tick", Some(minutely)).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    // One not made yet, and one the maker made already, each edited on its own and moved
    // days later.
    let alone = "tick::20270104T082000Z";
    let mut b = body("u-1", "Moved later");
    b["due_at"] = json!("2027-01-07T08:00:00Z");
    let (status, put) = call(&h.router, "PUT", &format!("/v1/reminders/{alone}"), Some(b)).await;
    assert_eq!(status, StatusCode::CREATED, "{put}");
    let made_first = "tick::20270104T080500Z";
    assert!(h.stored(made_first).await.is_some(), "made by the PUT");
    let mut b = body("u-1", "Made, then moved later");
    b["due_at"] = json!("2027-01-07T09:00:00Z");
    let uri = format!("/v1/reminders/{made_first}");
    let (status, put) = call(&h.router, "PUT", &uri, Some(b)).await;
    assert_eq!(status, StatusCode::OK, "{put}");
    // A day and a half of the maker, every quarter of an hour: over 2,000 occurrences.
    let mut now = at(common::standup::NOW);
    for _ in 0..(36 * 4) {
        now = now.plus(std::time::Duration::from_secs(15 * 60));
        make(&h, now).await;
    }
    clock.set(now);
    let (status, cancel) = call(&h.router, "DELETE", "/v1/series/tick", None).await;
    assert_eq!(status, StatusCode::OK, "{cancel}");
    for id in [alone, made_first] {
        let (_, r) = reminder(&h, id).await;
        assert_eq!(
            r["status"], "cancelled",
            "{id} left to be sent after the cancel: {r}"
        );
    }
}

/// A series created with its `starts_at` in the past makes nothing due before it existed, and
/// an edit of it later does not either (it would be sent at once, for a time nobody asked).
#[tokio::test]
async fn an_edit_makes_nothing_due_before_the_series_existed() {
    let (h, clock, _) = created().await;
    // 08:50 in Paris is 07:50 UTC: ten minutes before the harness's now.
    let rule = "FREQ=DAILY;BYHOUR=8;BYMINUTE=50";
    let body = |subject: &str| common::series_body("u-1", rule, "2027-01-04T07:30:00Z", subject);
    let (status, answer) = call(&h.router, "PUT", "/v1/series/late", Some(body("v1"))).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let before = "late::20270104T075000Z";
    assert!(h.stored(before).await.is_none(), "made at creation");
    clock.set(at("2027-01-04T08:01:00Z"));
    let (status, answer) = call(&h.router, "PUT", "/v1/series/late", Some(body("v2"))).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(
        h.stored(before).await.is_none(),
        "the edit made an occurrence due before the series existed"
    );
    let report = make(&h, at("2027-01-04T08:01:00Z")).await;
    assert!(h.stored(before).await.is_none(), "{report:?}");
    // The next day's is made, with the edit's content.
    clock.set(at("2027-01-05T07:40:00Z"));
    make(&h, at("2027-01-05T07:40:00Z")).await;
    let (_, next) = reminder(&h, "late::20270105T075000Z").await;
    assert_eq!(next["content"]["subject"], "v2", "{next}");
}
