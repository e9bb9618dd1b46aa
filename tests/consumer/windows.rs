//! Windows a review found between an operator's cancel and the system's other writers, each
//! proved by a test that failed before its fix (the window's number is in the name).

use std::sync::Arc;
use std::time::Duration;

use reminders::clock::Clock;
use reminders::consumer::Action;
use reminders::delivery::{transition, Cancelled, Written};
use reminders::domain::{Channel, DeliveryKey, Recipient, ReminderStatus, Retention};
use reminders::ledger::{Change, Ctx, LeaseToken, Status};
use reminders::policy::Outcome;
use reminders::ports::{
    DeliveryQueue, GatePartition, Ledger, Marked, MemoryLedger, MemoryQueue, MemoryReminderStore,
    Provider, ReminderStore, SendRequest, StaleHandles,
};
use reminders::reminder_writes::{self, Edit};
use reminders_harness::ManualClock;

use crate::harness::{reminder, Custom, T0};
use crate::support::edit_before_mark::EditBeforeMark;

/// A cancel against an edit that adds a channel: the cancel's mark is conditional on the version
/// it read, so the channel the edit added gets its `cancelled` ledger item before the command
/// says "cancelled".
#[tokio::test]
async fn a_cancel_covers_a_channel_added_while_it_ran() {
    let store = Arc::new(MemoryReminderStore::new(4));
    let ledger = Arc::new(MemoryLedger::default());
    let r = reminder("w3-cancel-edit", &[Channel::Sms]);
    store.insert(&r).await.unwrap();
    let added = Edit {
        recipients: Some(vec![
            Recipient::parse(Channel::Sms, "+14155550123").unwrap(),
            Recipient::parse(Channel::Email, "user@example.org").unwrap(),
        ]),
        ..Edit::default()
    };
    let racing = EditBeforeMark::around(store.clone(), ledger.clone(), added, T0);
    let report =
        reminder_writes::cancel(&racing, &*ledger, &r.reminder_id, T0, Retention::default())
            .await
            .unwrap()
            .unwrap();
    assert_eq!(report.reminder, Marked::Marked);
    let channels: Vec<(Channel, Cancelled)> = report.deliveries.clone();
    assert!(
        channels.contains(&(Channel::Email, Cancelled::Cancelled)),
        "{channels:?}"
    );
    for c in [Channel::Sms, Channel::Email] {
        let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, c);
        let rec = ledger.get(&key).await.unwrap().expect("a ledger item");
        assert_eq!(rec.status(), Status::Cancelled, "{c}");
    }
    let stored = store.get(&r.reminder_id).await.unwrap().unwrap();
    assert_eq!(
        (stored.status, stored.payload_version),
        (ReminderStatus::Cancelled, 2)
    );
}

/// A provider whose send outlives both the message's visibility and the lease: meanwhile a
/// second worker receives the message (a newer receipt handle) and takes the lapsed lease
/// over. Then the first send comes back accepted.
struct TakenOverMidSend {
    clock: ManualClock,
    ledger: Arc<MemoryLedger>,
    queue: Arc<MemoryQueue<ManualClock>>,
}

impl Provider for TakenOverMidSend {
    fn honours_idempotency_key(&self) -> bool {
        true
    }
    fn partition(&self, channel: Channel) -> GatePartition {
        GatePartition::new(channel, "slow")
    }
    async fn send(&self, request: &SendRequest) -> Outcome {
        Clock::sleep(&self.clock, Duration::from_secs(61)).await;
        let again = self.queue.receive(Channel::Sms, 10, 300).await.unwrap();
        assert_eq!(again.len(), 1, "the second worker holds the message now");
        let held = self
            .ledger
            .get(&request.delivery_key)
            .await
            .unwrap()
            .unwrap();
        let ctx = Ctx {
            key: request.delivery_key.clone(),
            now: Clock::now(&self.clock),
            expires_at: held.expires_at(),
            origin: None,
        };
        let takeover = Change::Takeover {
            stale_token: held.lease_token().cloned().unwrap(),
            token: LeaseToken::generate(&mut rand::rng()),
            lease_expires_at: ctx.now.plus(Duration::from_secs(60)),
        };
        let taken = transition(&*self.ledger, Some(held), takeover, &ctx).await;
        assert!(matches!(taken, Ok(Written::Applied(_))), "{taken:?}");
        Outcome::Delivered {
            receipt: Some("first".into()),
        }
    }
}

/// Receipt handles: a worker whose visibility ran out and whose lease was taken over finds its
/// outcome write refused. It must not ack: with an older handle that acts (as the emulator's
/// does), the delete would remove the message the new holder is working on.
#[tokio::test]
async fn a_worker_that_lost_its_lease_leaves_the_message_to_the_holder() {
    let r = reminder("w5-handles", &[Channel::Sms]);
    let clock = ManualClock::at(T0);
    let ledger = Arc::new(MemoryLedger::default());
    let queue = MemoryQueue::new(clock.clone()).with_stale_handles(StaleHandles::Act);
    let queue = Arc::new(queue);
    let provider = Arc::new(TakenOverMidSend {
        clock: clock.clone(),
        ledger: ledger.clone(),
        queue: queue.clone(),
    });
    let dlq = Arc::new(MemoryQueue::new(clock.clone()));
    let ports = (ledger.clone(), dlq, provider);
    let cfg = crate::harness::test_config();
    let w = Custom::on_queue(&clock, &r, ports, cfg, queue.clone()).await;
    let msg = crate::harness::message(&r, Channel::Sms);
    w.enqueue(&msg).await;
    let out = w.poll(Channel::Sms, 30).await;
    assert_eq!(out.records[0].action, Action::Leave);
    assert_eq!(
        queue.len(Channel::Sms),
        1,
        "the holder's message is still there"
    );
    let rec = ledger.get(&msg.delivery_key).await.unwrap().unwrap();
    assert_eq!(rec.status(), Status::Sending, "the holder finishes it");
}
