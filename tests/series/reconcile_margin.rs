//! Reconcile's staleness follows the clock margin (docs/design.md, "Clock margin"): an occurrence
//! whose freshness ended less than the margin ago may still be fresh by a clock off by up to
//! it, so it is made (and expired with its reason once surely stale); one past the margin is
//! never made again.

use super::*;

/// Reconcile `s` at the occurrence `k` minutes in, at `now`: whether it was made.
async fn made(w: &World, s: &Series, k: u64, now: Timestamp) -> bool {
    let (store, ledger) = (&*w.store, &*w.ledger);
    series::reconcile(store, ledger, s, &[at(k)], now, Retention::default())
        .await
        .unwrap();
    let id = occurrence_id(&SeriesId::parse("standup").unwrap(), at(k));
    store.get(&id).await.unwrap().is_some()
}

#[tokio::test]
async fn reconcile_makes_an_occurrence_inside_the_margin_and_not_one_surely_stale() {
    let w = world();
    let s = standup("FREQ=DAILY;BYHOUR=22;BYMINUTE=0,1", Duration::from_secs(60));
    // Fresh until a minute after its time: half a second past that is inside the margin.
    assert!(made(&w, &s, 0, at(0).plus(Duration::from_millis(60_500))).await);
    // A second and a millisecond past it, stale by every clock within the margin.
    assert!(!made(&w, &s, 1, at(1).plus(Duration::from_millis(61_001))).await);
}
