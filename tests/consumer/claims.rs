//! A claim is one conditional write on the ledger: whatever happened to its answer, the
//! delivery has one claimer.

use std::time::Duration;

use rand::SeedableRng;
use reminders::delivery::{claim, Claim, ClaimRequest};
use reminders::domain::Channel;
use reminders::ledger::{Ctx, LeaseToken};
use reminders::ports::{FaultPoint, MemoryLedger};
use reminders_harness::around::{Around, Faults};

use crate::harness::T0;

/// A claim whose write went through but whose answer was lost: one read shows it was the
/// claimer's, a retry of the same request finds its own lease (acquired, not "held by
/// another"), and another claimer is refused.
#[tokio::test]
async fn a_claim_whose_response_was_lost_is_still_ours() {
    let faults = Faults::default();
    let ledger = Around::new(MemoryLedger::default(), faults.clone());
    faults.fail(reminders::ports::ledger::OP_PUT, FaultPoint::After, 1);
    let key = reminders::domain::DeliveryKey::derive(
        &reminders::domain::ReminderId::parse("r").unwrap(),
        &reminders::domain::SubscriberId::parse("s").unwrap(),
        Channel::Email,
    );
    let ctx = Ctx {
        key,
        now: T0,
        expires_at: 9_999,
        origin: None,
    };
    let req = |seed| ClaimRequest {
        token: LeaseToken::generate(&mut rand::rngs::StdRng::seed_from_u64(seed)),
        lease_expires_at: T0.plus(Duration::from_secs(30)),
        payload_version: 1,
        policy: reminders::policy::RetryPolicy::default(),
    };
    let got = claim(&ledger, req(1), &ctx).await.unwrap();
    assert!(matches!(got, Claim::Acquired(_)), "{got:?}");
    let again = claim(&ledger, req(1), &ctx).await.unwrap();
    assert!(matches!(again, Claim::Acquired(_)), "{again:?}");
    let other = claim(&ledger, req(2), &ctx).await.unwrap();
    assert!(matches!(other, Claim::HeldByOther { .. }), "{other:?}");
}
