//! A consumer whose clock may be off by up to [`CLOCK_MARGIN`] (docs/design.md, "Clock margin"): it
//! sends only what is fresh by every clock within the margin of its reading, and expires only what
//! is stale by every one; between the two the delivery waits, unsent and unexpired, until it is
//! surely stale. The chaos worlds run workers off by up to the margin (`--skew-ms`).

use std::sync::Arc;
use std::time::Duration;

use reminders::consumer::Action;
use reminders::domain::reminder::{freshness, surely_stale_at, Freshness, CLOCK_MARGIN};
use reminders::domain::{Channel, ReminderStatus};
use reminders::ledger::Status;
use reminders::ports::{Ledger, MemoryLedger, MemoryQueue, ReminderStore};
use reminders_harness::around::{Around, Latency};
use reminders_harness::ManualClock;
use reminders_harness::ScriptedProvider;

use crate::harness::{message, reminder, test_config, Custom, Mem, T0};

const SMS: Channel = Channel::Sms;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn the_margin_splits_a_deadline_into_fresh_unsure_and_stale() {
    let fresh_until = T0.plus(Duration::from_secs(3600));
    let f = |now| freshness(fresh_until, now);
    assert_eq!(f(fresh_until.minus(CLOCK_MARGIN)), Freshness::Fresh);
    let unsure = Freshness::Unsure {
        until: surely_stale_at(fresh_until),
    };
    assert_eq!(f(fresh_until.minus(CLOCK_MARGIN - ms(1))), unsure);
    assert_eq!(f(fresh_until), unsure);
    assert_eq!(f(fresh_until.plus(CLOCK_MARGIN)), unsure);
    assert_eq!(f(fresh_until.plus(CLOCK_MARGIN + ms(1))), Freshness::Stale);
    assert_eq!(
        surely_stale_at(fresh_until),
        fresh_until.plus(CLOCK_MARGIN + ms(1))
    );
}

/// Read just outside the margin before its deadline: sent.
#[tokio::test]
async fn a_delivery_fresh_by_every_clock_in_the_margin_is_sent() {
    let w = Mem::new(test_config(), true);
    let r = w.reminder("edge-fresh", &[SMS]).await;
    w.clock.set(r.fresh_until.minus(CLOCK_MARGIN + ms(1)));
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    let out = w.run(SMS).await.unwrap();
    assert_eq!(out.records[0].action, Action::Ack);
    assert_eq!(w.provider.calls_for(&msg.delivery_key), 1);
    let rec = w.record(&msg.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Delivered);
}

/// Read inside the margin of its deadline (either side of it): a clock off by the margin
/// could be past it, or short of it. Neither sent nor expired until it is surely stale;
/// then expired, never sent.
#[tokio::test]
async fn one_too_close_to_its_deadline_to_call_waits_until_surely_stale_then_expires() {
    for offset_ms in [-999_i64, 0, 1_000] {
        let w = Mem::new(test_config(), true);
        let r = w.reminder("edge-unsure", &[SMS]).await;
        let at = if offset_ms < 0 {
            r.fresh_until.minus(ms(offset_ms.unsigned_abs()))
        } else {
            r.fresh_until.plus(ms(offset_ms as u64))
        };
        w.clock.set(at);
        let msg = message(&r, SMS);
        w.enqueue(&msg).await;
        let out = w.run(SMS).await.unwrap();
        let wait = surely_stale_at(r.fresh_until)
            .since(at)
            .as_millis()
            .div_ceil(1000);
        assert_eq!(
            out.records[0].action,
            Action::Hold { secs: wait as u32 },
            "{offset_ms} ms from the deadline"
        );
        assert_eq!(w.provider.calls_for(&msg.delivery_key), 0);
        let status = w.record(&msg.delivery_key).await.map(|r| r.status());
        assert_ne!(
            status,
            Some(Status::Expired),
            "{offset_ms} ms: expired early"
        );
        let stored = w.store.get(&r.reminder_id).await.unwrap().unwrap();
        assert_ne!(stored.status, ReminderStatus::Expired);

        // Visible again when the hold ends (whole seconds), surely stale by then.
        w.clock.set(at.plus(Duration::from_secs(wait as u64)));
        let out = w.run(SMS).await.unwrap();
        assert_eq!(out.records[0].action, Action::Ack, "{offset_ms} ms");
        let rec = w.record(&msg.delivery_key).await.unwrap();
        assert_eq!(rec.status(), Status::Expired, "{offset_ms} ms");
        assert_eq!(w.provider.calls_for(&msg.delivery_key), 0);
    }
}

/// A claim that ends inside the margin: the lease is given back (nothing spent, nothing
/// sent, not expired), and the delivery expires once surely stale.
#[tokio::test]
async fn a_claim_that_ends_too_close_to_call_gives_its_lease_back_unsent() {
    let r = reminder("unsure-after-claim", &[SMS]);
    let clock = ManualClock::at(r.fresh_until.minus(CLOCK_MARGIN + ms(100)));
    let ledger = Arc::new(MemoryLedger::default());
    let provider = Arc::new(ScriptedProvider::new(clock.clone(), true));
    // The claim's write takes 200 ms: from fresh by every clock into too close to call.
    let slowed = Around::new(
        ledger.clone(),
        Latency {
            clock: clock.clone(),
            latency: ms(200),
        },
    );
    let dlq = Arc::new(MemoryQueue::new(clock.clone()));
    let ports = (slowed, dlq, provider.clone());
    let w = Custom::new(&clock, &r, ports, test_config()).await;
    let msg = message(&r, SMS);
    w.enqueue(&msg).await;
    let out = w.poll(SMS, 30).await;
    assert!(
        matches!(out.records[0].action, Action::Hold { .. }),
        "{:?}",
        out.records[0].action
    );
    assert_eq!(provider.calls_for(&msg.delivery_key), 0, "nothing sent");
    let rec = Ledger::get(&*ledger, &msg.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(rec.status(), Status::Expired, "expired while maybe fresh");
    assert_eq!(rec.attempt_count(), 0, "nothing spent");

    // Back when its hold (whole seconds) ends, surely stale by then.
    clock.set(surely_stale_at(r.fresh_until).plus(Duration::from_secs(1)));
    let out = w.poll(SMS, 30).await;
    assert_eq!(out.records[0].action, Action::Ack);
    let rec = Ledger::get(&*ledger, &msg.delivery_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status(), Status::Expired);
    assert_eq!(provider.calls_for(&msg.delivery_key), 0);
}
