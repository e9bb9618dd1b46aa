//! The one-read give-back when an edit lands between the claim and the read: the edit's
//! horizon write lands on the item the claim just created (keeping our lease, bumping its
//! version), the read sees the edited reminder, and the claim is still undone — never left
//! `sending` for a takeover to judge `ambiguous` with nothing sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reminders::clock::{ManualClock, Timestamp};
use reminders::consumer::{BatchOutcome, Consumer};
use reminders::domain::{Channel, DeliveryKey, DeliveryMessage, PerChannel, Retention};
use reminders::ledger::{DeliveryRecord, Status};
use reminders::ports::{
    Cas, DeliveryQueue, Expected, Ledger, MemoryGate, MemoryLedger, MemoryQueue,
    MemoryReminderStore, OutgoingMessage, PortError, PortSet, ReminderStore, ScriptedProvider,
};
use reminders::providers::secret::SuppressionKeySource;
use reminders::reminder_writes::{self, Edit};

use crate::harness::{queue_urls, reminder, sole_message, suppression_key, test_config, T0};

const SMS: Channel = Channel::Sms;

/// A ledger on which, right after the first claim lands, the application's edit is applied
/// (through the same stores the consumer uses).
struct AfterClaim {
    inner: Arc<MemoryLedger>,
    store: Arc<MemoryReminderStore>,
    edit: Mutex<Option<Edit>>,
}

impl Ledger for AfterClaim {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        self.inner.get(key).await
    }

    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        let answer = self.inner.put_if(record, expected).await?;
        let claimed = answer == Cas::Applied && record.status() == Status::Sending;
        let edit = claimed.then(|| self.edit.lock().unwrap().take()).flatten();
        if let Some(edit) = edit {
            let id = reminders::domain::ReminderId::parse("snoozed").unwrap();
            let store = &*self.store;
            let edited =
                reminder_writes::edit(store, &*self.inner, &id, edit, T0, Retention::default())
                    .await
                    .unwrap();
            assert!(
                matches!(edited, reminder_writes::Edited::Edited(_)),
                "the edit applied: {edited:?}"
            );
        }
        Ok(answer)
    }

    async fn delete_if(&self, key: &DeliveryKey, expected: Expected) -> Result<Cas, PortError> {
        self.inner.delete_if(key, expected).await
    }
}

type Ports<Lg> = PortSet<
    ManualClock,
    Arc<MemoryReminderStore>,
    Lg,
    Arc<MemoryGate>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<ScriptedProvider<ManualClock>>,
>;

/// A consumer over in-memory ports and `ledger`, its provider not idempotent (SES, SNS: a
/// lapsed claim would die `ambiguous`), and `msg` waiting on the SMS queue.
struct World<Lg: Ledger> {
    clock: ManualClock,
    consumer: Consumer<Ports<Lg>>,
    provider: Arc<ScriptedProvider<ManualClock>>,
}

impl<Lg: Ledger + 'static> World<Lg> {
    async fn new(store: &Arc<MemoryReminderStore>, ledger: Lg, msg: &DeliveryMessage) -> Self {
        let clock = ManualClock::at(T0);
        let queue = Arc::new(MemoryQueue::new(clock.clone()));
        let provider = Arc::new(ScriptedProvider::new(clock.clone(), false));
        let ports: Ports<Lg> = PortSet {
            clock: clock.clone(),
            reminders: store.clone(),
            ledger,
            gate: Arc::new(MemoryGate::default()),
            queue: queue.clone(),
            dead_letters: Arc::new(MemoryQueue::new(clock.clone())),
            providers: PerChannel::from_fn(|_| provider.clone()),
        };
        let consumer = Consumer::new(ports, test_config(), queue_urls(), 9)
            .with_suppression_key(Some(SuppressionKeySource::Fixed(suppression_key())));
        let entry = OutgoingMessage {
            entry_id: "0".into(),
            body: msg.encode(),
            delay_secs: 0,
        };
        assert!(queue.send_batch(SMS, &[entry]).await.unwrap().is_empty());
        Self {
            clock,
            consumer,
            provider,
        }
    }

    /// One poll of the SMS queue at `at`, as the event source mapping would.
    async fn poll(&self, at: Timestamp) -> Option<BatchOutcome> {
        self.clock.set(at);
        reminders_harness::local::poll_once(&self.consumer, &queue_urls(), SMS, 10, 30, None)
            .await
            .unwrap()
    }
}

/// Ten minutes later, fresh ten minutes longer.
fn snooze(r: &reminders::domain::Reminder) -> Edit {
    let later = Duration::from_secs(600);
    Edit {
        due_at: Some(r.due_at.plus(later)),
        fresh_until: Some(r.fresh_until.plus(later)),
        content: None,
        recipients: None,
        detach: false,
        may_make_stale: false,
    }
}

/// A snooze at the due time: ten minutes later, fresh ten minutes longer. Its horizon write
/// lands on the item the one-read claim created, before the read.
#[tokio::test]
async fn an_edit_between_the_claim_and_the_read_leaves_no_claim_behind() {
    let store = Arc::new(MemoryReminderStore::new(4));
    let ledger = Arc::new(MemoryLedger::default());
    let r = reminder("snoozed", &[SMS]);
    store.insert(&r).await.unwrap();
    let msg = sole_message(&r, SMS);
    let after_claim = AfterClaim {
        inner: ledger.clone(),
        store: store.clone(),
        edit: Mutex::new(Some(snooze(&r))),
    };
    let w = World::new(&store, after_claim, &msg).await;
    let (provider, poll) = (&w.provider, |at| w.poll(at));
    let out = poll(T0).await.expect("received");
    let m = out.metrics.get(SMS);
    assert_eq!(
        (m.one_read, m.one_read_released),
        (1, 1),
        "claimed, given back"
    );
    assert_eq!(provider.calls_for(&msg.delivery_key), 0);
    // The two-read path held it for the new due time: no claim left behind.
    let item = ledger.get(&msg.delivery_key).await.unwrap();
    assert!(
        item.as_ref().is_none_or(|i| i.status() != Status::Sending),
        "no claim left sending: {item:?}"
    );
    // Past the new due time (and past any lease), it is sent once, never `ambiguous`.
    let mut at = T0;
    for _ in 0..40 {
        at = at.plus(Duration::from_secs(30));
        let _ = poll(at).await;
    }
    let item = ledger
        .get(&msg.delivery_key)
        .await
        .unwrap()
        .expect("an item");
    assert_eq!(item.status(), Status::Delivered, "{item:?}");
    assert_eq!(provider.calls_for(&msg.delivery_key), 1);
}

/// A ledger whose first delete applies but whose answer is lost: meanwhile another worker (an
/// SQS duplicate of the same message, or a consumer of the previous version mid-deploy)
/// claims the delivery from the absent item, and then the SDK retries the delete as sent.
struct RetriedDelete {
    inner: Arc<MemoryLedger>,
    other: Mutex<Option<reminders::delivery::ClaimRequest>>,
    other_claim: Mutex<Option<DeliveryRecord>>,
}

impl Ledger for RetriedDelete {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        self.inner.get(key).await
    }

    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        self.inner.put_if(record, expected).await
    }

    async fn delete_if(&self, key: &DeliveryKey, expected: Expected) -> Result<Cas, PortError> {
        let first = self.inner.delete_if(key, expected.clone()).await?;
        let other = self.other.lock().unwrap().take();
        if let (Cas::Applied, Some(req)) = (&first, other) {
            let ctx = reminders::ledger::Ctx {
                key: key.clone(),
                now: T0,
                expires_at: 1_900_000_000,
                origin: None,
            };
            let got = reminders::delivery::claim(&*self.inner, req, &ctx)
                .await
                .unwrap();
            let reminders::delivery::Claim::Acquired(claimed) = got else {
                panic!("the other worker claims the absent item: {got:?}")
            };
            *self.other_claim.lock().unwrap() = Some(claimed);
            // The first answer was lost: the SDK sends the same request again.
            return self.inner.delete_if(key, expected).await;
        }
        Ok(first)
    }
}

/// A give-back whose delete is retried after another worker claimed the delivery anew: the
/// retry finds the same transition number and state, but not its own lease, and leaves that
/// worker's claim alone (it would otherwise be deleted under a send in progress, and the
/// delivery claimed from nothing and sent a second time).
#[tokio::test]
async fn a_retried_give_back_never_removes_a_claim_made_since() {
    let store = Arc::new(MemoryReminderStore::new(4));
    let inner = Arc::new(MemoryLedger::default());
    let r = reminder("retried", &[SMS]);
    store.insert(&r).await.unwrap();
    let msg = sole_message(&r, SMS);
    // Edited after its message was made: the one-read claim is given back.
    let edited = reminder_writes::edit(
        &*store,
        &*inner,
        &r.reminder_id,
        snooze(&r),
        T0,
        Retention::default(),
    )
    .await
    .unwrap();
    assert!(
        matches!(edited, reminder_writes::Edited::Edited(_)),
        "{edited:?}"
    );
    let other = reminders::delivery::ClaimRequest {
        token: reminders::ledger::LeaseToken::generate(
            &mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(77),
        ),
        lease_expires_at: T0.plus(Duration::from_secs(60)),
        payload_version: msg.payload_version,
        policy: reminders::policy::RetryPolicy::default(),
    };
    let ledger = Arc::new(RetriedDelete {
        inner: inner.clone(),
        other: Mutex::new(Some(other)),
        other_claim: Mutex::new(None),
    });
    let w = World::new(&store, ledger.clone(), &msg).await;
    let out = w.poll(T0).await.expect("received");
    let m = out.metrics.get(SMS);
    assert_eq!(m.one_read, 1, "the sole message took the one-read path");
    let theirs = ledger
        .other_claim
        .lock()
        .unwrap()
        .clone()
        .expect("the other worker claimed between the delete and its retry");
    let item = inner.get(&msg.delivery_key).await.unwrap();
    assert_eq!(
        item.as_ref(),
        Some(&theirs),
        "the other worker's claim stands, untouched"
    );
    assert_eq!(
        w.provider.calls_for(&msg.delivery_key),
        0,
        "this worker sent nothing: the delivery is the other worker's"
    );
}
