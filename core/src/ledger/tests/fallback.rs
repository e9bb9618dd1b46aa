//! A dead item that handed its reminder on to another channel.

use super::*;

/// A death that handed the reminder on to another channel is not redriven: both channels
/// would reach the person.
#[test]
fn a_death_that_fell_back_is_not_redriven() {
    let sending = step(None, claim(tok(1)));
    let dead = step(
        Some(&sending),
        Change::Die {
            token: Some(tok(1)),
            reason: DeadReason::Rejected,
            spends_attempt: true,
            error: None,
            fallback_to: Some(Channel::Email),
            maybe_sent: false,
        },
    );
    assert_eq!(dead.fallback_to(), Some(Channel::Email));
    let redrive = Change::Redrive {
        audit: RedriveAudit {
            batch_id: "b".into(),
            operator: "op".into(),
            note: String::new(),
        },
        reasons: [DeadReason::Rejected].into(),
    };
    let refused = apply(Some(&dead), redrive, &ctx_at(LATER)).unwrap_err();
    assert_eq!(refused.why, Why::FellBack(Channel::Email));
}

/// A death that may have reached the person never hands on, whoever asks: the ledger refuses
/// the `HandOn` itself, while one known to have sent nothing takes it once.
#[test]
fn a_death_that_may_have_sent_refuses_a_hand_on() {
    let sending = step(None, claim(tok(1)));
    let die = |maybe_sent| Change::Die {
        token: Some(tok(1)),
        reason: DeadReason::Rejected,
        spends_attempt: true,
        error: None,
        fallback_to: None,
        maybe_sent,
    };
    let hand_on = Change::HandOn { to: Channel::Email };
    let quiet = step(Some(&sending), die(false));
    let handed = step(Some(&quiet), hand_on.clone());
    assert_eq!(handed.fallback_to(), Some(Channel::Email));
    assert!(apply(Some(&handed), hand_on.clone(), &ctx_at(T0)).is_err());

    let maybe = step(Some(&sending), die(true));
    assert!(maybe.may_have_reached());
    assert!(apply(Some(&maybe), hand_on, &ctx_at(T0)).is_err());
}
