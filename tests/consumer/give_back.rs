//! The one-read give-back when an edit lands between the claim and the read: the edit's
//! horizon write lands on the item the claim just created (keeping our lease, bumping its
//! version), the read sees the edited reminder, and the claim is still undone — never left
//! `sending` for a takeover to judge `ambiguous` with nothing sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::consumer::{BatchOutcome, Consumer};
use reminders::domain::{Channel, DeliveryMessage, PerChannel, Retention};
use reminders::ledger::{DeliveryRecord, Status};
use reminders::ports::{
    Cas, DeliveryQueue, Ledger, MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore,
    OutgoingMessage, PortError, PortSet, ReminderStore,
};
use reminders::providers::secret::SuppressionKeySource;
use reminders::reminder_writes::{self, Edit};
use reminders_harness::around::{read, Around, Call, Hook, Next, Value};
use reminders_harness::ManualClock;
use reminders_harness::ScriptedProvider;

use crate::harness::{queue_urls, reminder, sole_message, suppression_key, test_config, T0};

const SMS: Channel = Channel::Sms;

/// A hook on a ledger by which, right after the first claim lands, the application's edit is
/// applied (through the same stores the consumer uses).
struct AfterClaim {
    ledger: Arc<MemoryLedger>,
    store: Arc<MemoryReminderStore>,
    edit: Mutex<Option<Edit>>,
}

impl Hook for AfterClaim {
    async fn around<R: Value>(&self, call: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        let answer = next().await?;
        let Call::PutIf { record, .. } = call else {
            return Ok(answer);
        };
        let claimed = *read::<Cas>(&answer) == Cas::Applied && record.status() == Status::Sending;
        let edit = claimed.then(|| self.edit.lock().unwrap().take()).flatten();
        if let Some(edit) = edit {
            let id = reminders::domain::ReminderId::parse("snoozed").unwrap();
            let (store, ledger) = (&*self.store, &*self.ledger);
            let edited = reminder_writes::edit(store, ledger, &id, edit, T0, Retention::default())
                .await
                .unwrap();
            assert!(
                matches!(edited, reminder_writes::Edited::Edited(_)),
                "the edit applied: {edited:?}"
            );
        }
        Ok(answer)
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
        reminders_harness::mapping::Mapping::new(&queue_urls(), SMS, 10, 30)
            .poll(&self.consumer, None)
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
    let after_claim = Around::new(
        ledger.clone(),
        AfterClaim {
            ledger: ledger.clone(),
            store: store.clone(),
            edit: Mutex::new(Some(snooze(&r))),
        },
    );
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

/// A hook on a ledger by which the first delete applies but its answer is lost: meanwhile
/// another worker (an SQS duplicate of the same message, or a consumer of the previous version
/// mid-deploy) claims the delivery from the absent item, and then the SDK sends the delete
/// again.
struct RetriedDelete {
    ledger: Arc<MemoryLedger>,
    other: Mutex<Option<reminders::delivery::ClaimRequest>>,
    other_claim: Mutex<Option<DeliveryRecord>>,
}

impl Hook for RetriedDelete {
    async fn around<R: Value>(&self, call: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        let first = next().await?;
        let Call::DeleteIf { key, .. } = call else {
            return Ok(first);
        };
        let other = self.other.lock().unwrap().take();
        if let (Cas::Applied, Some(req)) = (read::<Cas>(&first), other) {
            let ctx = reminders::ledger::Ctx {
                key: (*key).clone(),
                now: T0,
                expires_at: 1_900_000_000,
                origin: None,
            };
            let got = reminders::delivery::claim(&*self.ledger, req, &ctx)
                .await
                .unwrap();
            let reminders::delivery::Claim::Acquired(claimed) = got else {
                panic!("the other worker claims the absent item: {got:?}")
            };
            *self.other_claim.lock().unwrap() = Some(claimed);
            // The first answer was lost: the SDK sends the same request again.
            return next().await;
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
    let ledger = Arc::new(Around::new(
        inner.clone(),
        RetriedDelete {
            ledger: inner.clone(),
            other: Mutex::new(Some(other)),
            other_claim: Mutex::new(None),
        },
    ));
    let w = World::new(&store, ledger.clone(), &msg).await;
    let out = w.poll(T0).await.expect("received");
    let m = out.metrics.get(SMS);
    assert_eq!(m.one_read, 1, "the sole message took the one-read path");
    let theirs = ledger
        .hook
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
