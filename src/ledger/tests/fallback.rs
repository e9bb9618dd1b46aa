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
