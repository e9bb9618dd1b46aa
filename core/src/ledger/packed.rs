//! The record in the in-memory ledger's compact byte form ([`crate::packed`]): every field, in
//! the order below, read back into the record that was written (a test holds it so over
//! records of every state). The key is the ledger's own key, not repeated. Times are kept as
//! offsets from `first_seen_at`, which most are within minutes of.

use super::*;
use crate::domain::wire::intern;
use crate::packed::{Reader, Writer};
use crate::policy::{AmbiguousRule, Backoff};

const AMBIGUOUS: [AmbiguousRule; 2] = [AmbiguousRule::RetryIfIdempotent, AmbiguousRule::Dead];

impl DeliveryRecord {
    /// This record's bytes.
    pub(crate) fn pack(&self) -> Box<[u8]> {
        // Every field named: a field added to the record and not kept here does not compile.
        let DeliveryRecord {
            delivery_key: _,
            status,
            seq,
            attempt_count,
            throttle_count,
            lease_token,
            lease_expires_at,
            next_eligible_at,
            last_outcome_class,
            last_error,
            dead_reason,
            dlq_copied_at,
            dlq_copy_claimed_at,
            died_under_lease,
            dlq_copy_claim,
            provider_receipt,
            payload_version,
            policy,
            first_seen_at,
            updated_at,
            history,
            expires_at,
            origin,
            fallback_to,
            maybe_sent,
            unknown,
        } = self;
        let base = *first_seen_at;
        let at = |w: &mut Writer, t: Timestamp| w.i64(t.as_millis().wrapping_sub(base.as_millis()));
        let mut w = Writer::with_capacity(256);
        // Status, seq and the lease token first: the ledger's condition reads only them
        // ([`packed_fence`]).
        w.code(status, &Status::ALL, status.as_str());
        w.u64(*seq);
        w.time(base);
        w.u64(u64::from(*attempt_count));
        w.u64(u64::from(*throttle_count));
        w.opt(lease_token.as_ref(), |w, t| w.str(t.as_str()));
        w.opt(*lease_expires_at, at);
        w.opt(*next_eligible_at, at);
        w.opt(last_outcome_class.as_ref(), |w, c| {
            w.code(c, &OutcomeClass::KNOWN, c.as_str())
        });
        w.opt(last_error.as_deref(), Writer::str);
        w.opt(dead_reason.as_ref(), |w, r| {
            w.code(r, &DeadReason::ALL, r.as_str())
        });
        w.opt(*dlq_copied_at, at);
        w.opt(*dlq_copy_claimed_at, at);
        w.opt(died_under_lease.as_ref(), |w, t| w.str(t.as_str()));
        w.opt(dlq_copy_claim.as_ref(), |w, t| w.str(t.as_str()));
        w.opt(provider_receipt.as_deref(), Writer::str);
        w.u64(*payload_version);
        w.opt(policy.as_ref(), pack_policy);
        at(&mut w, *updated_at);
        w.u64(history.len() as u64);
        for (k, h) in history {
            w.str(k);
            at(&mut w, h.at);
            w.code(&h.from, &Status::ALL, h.from.as_str());
            w.code(&h.to, &Status::ALL, h.to.as_str());
            w.opt(h.detail.as_deref(), Writer::str);
            w.opt(h.redrive.as_ref(), |w, r| {
                w.str(&r.batch_id);
                w.str(&r.operator);
                w.str(&r.note);
            });
        }
        w.i64(*expires_at);
        w.opt(origin.as_ref(), |w, o| {
            // Every field named here too.
            let Origin {
                reminder_id,
                subscriber_id,
                channel,
                fallback_from,
                chain_head,
                chain,
                unknown,
            } = o;
            w.str(reminder_id.as_str());
            w.str(subscriber_id.as_str());
            w.code(channel, &Channel::ALL, channel.as_str());
            w.opt(*fallback_from, |w, c| w.code(&c, &Channel::ALL, c.as_str()));
            w.bool(*chain_head);
            w.u64(chain.len() as u64);
            for c in chain {
                w.code(c, &Channel::ALL, c.as_str());
            }
            w.opt(unknown.to_text().as_deref(), Writer::str);
        });
        w.opt(*fallback_to, |w, c| w.code(&c, &Channel::ALL, c.as_str()));
        w.bool(*maybe_sent);
        w.opt(unknown.to_text().as_deref(), Writer::str);
        w.finish()
    }

    /// The record `pack` made these bytes of, under its key; `None` if they are not one.
    pub(crate) fn unpack(delivery_key: DeliveryKey, bytes: &[u8]) -> Option<Self> {
        let mut r = Reader::new(bytes);
        let (status, seq) = version(&mut r)?;
        let base = r.time()?.as_millis();
        let at = |r: &mut Reader<'_>| {
            r.i64()
                .map(|d| Timestamp::from_millis(base.wrapping_add(d)))
        };
        let token = |r: &mut Reader<'_>| r.string().map(LeaseToken);
        let record = DeliveryRecord {
            delivery_key,
            status,
            seq,
            attempt_count: r.u32()?,
            throttle_count: r.u32()?,
            lease_token: r.opt(token)?,
            lease_expires_at: r.opt(at)?,
            next_eligible_at: r.opt(at)?,
            last_outcome_class: r.opt(|r| {
                Some(
                    r.code(&OutcomeClass::KNOWN)?
                        .unwrap_or_else(|s| OutcomeClass::Unknown(intern(s))),
                )
            })?,
            last_error: r.opt(Reader::string)?,
            dead_reason: r.opt(|r| {
                Some(
                    r.code(&DeadReason::ALL)?
                        .unwrap_or_else(|s| DeadReason::Unknown(intern(s))),
                )
            })?,
            dlq_copied_at: r.opt(at)?,
            dlq_copy_claimed_at: r.opt(at)?,
            died_under_lease: r.opt(token)?,
            dlq_copy_claim: r.opt(token)?,
            provider_receipt: r.opt(Reader::string)?,
            payload_version: r.u64()?,
            policy: r.opt(unpack_policy)?,
            first_seen_at: Timestamp::from_millis(base),
            updated_at: at(&mut r)?,
            history: {
                let n = r.u64()?;
                let mut history = BTreeMap::new();
                for _ in 0..n {
                    let key = r.string()?;
                    let entry = HistoryEntry {
                        at: at(&mut r)?,
                        from: status_of(&mut r)?,
                        to: status_of(&mut r)?,
                        detail: r.opt(Reader::string)?,
                        redrive: r.opt(|r| {
                            Some(RedriveAudit {
                                batch_id: r.string()?,
                                operator: r.string()?,
                                note: r.string()?,
                            })
                        })?,
                    };
                    history.insert(key, entry);
                }
                history
            },
            expires_at: r.i64()?,
            origin: r.opt(|r| {
                Some(Origin {
                    reminder_id: ReminderId::parse(r.str()?).ok()?,
                    subscriber_id: SubscriberId::parse(r.str()?).ok()?,
                    channel: channel(r)?,
                    fallback_from: r.opt(channel)?,
                    chain_head: r.bool()?,
                    chain: {
                        let n = r.u64()?;
                        (0..n).map(|_| channel(r)).collect::<Option<_>>()?
                    },
                    unknown: unknown(r)?,
                })
            })?,
            fallback_to: r.opt(channel)?,
            maybe_sent: r.bool()?,
            unknown: unknown(&mut r)?,
        };
        r.end()?;
        Some(record)
    }
}

/// The status, transition number and lease token of packed bytes, without reading the rest:
/// what a conditional write compares ([`crate::ports::Expected`]).
pub(crate) fn packed_fence(bytes: &[u8]) -> Option<(Status, u64, Option<&str>)> {
    let mut r = Reader::new(bytes);
    let (status, seq) = version(&mut r)?;
    let _first_seen_at = r.time()?;
    let _attempts = r.u64()?;
    let _throttles = r.u64()?;
    let lease = r.opt(Reader::str)?;
    Some((status, seq, lease))
}

fn version(r: &mut Reader<'_>) -> Option<(Status, u64)> {
    Some((status_of(r)?, r.u64()?))
}

fn status_of(r: &mut Reader<'_>) -> Option<Status> {
    Some(
        r.code(&Status::ALL)?
            .unwrap_or_else(|s| Status::Unknown(intern(s))),
    )
}

/// What [`Unknown::to_text`] wrote (nothing: none).
fn unknown(r: &mut Reader<'_>) -> Option<Unknown> {
    match r.opt(Reader::str)? {
        None => Some(Unknown::default()),
        Some(text) => Unknown::from_text(text),
    }
}

fn channel(r: &mut Reader<'_>) -> Option<Channel> {
    // Channels have no unknown case: a name this version lacks is not one of these bytes.
    r.code(&Channel::ALL)?.ok()
}

fn pack_policy(w: &mut Writer, p: &RetryPolicy) {
    let RetryPolicy {
        version,
        max_attempts,
        backoff,
        freshness_default_secs,
        max_throttle_deferrals,
        throttle_base_secs,
        throttle_cap_secs,
        ambiguous,
    } = p;
    w.str(version);
    w.u64(u64::from(*max_attempts));
    match backoff {
        Backoff::Exponential {
            base_secs,
            cap_secs,
        } => {
            w.u64(0);
            w.u64(*base_secs);
            w.u64(*cap_secs);
        }
        Backoff::Schedule { schedule_secs } => {
            w.u64(1);
            w.u64(schedule_secs.len() as u64);
            for s in schedule_secs {
                w.u64(*s);
            }
        }
        Backoff::Fitted { factor } => {
            w.u64(2);
            w.u64(u64::from(*factor));
        }
        Backoff::Unknown(raw) => {
            w.u64(3);
            w.str(&raw.to_string());
        }
    }
    w.u64(*freshness_default_secs);
    w.u64(u64::from(*max_throttle_deferrals));
    w.u64(*throttle_base_secs);
    w.u64(*throttle_cap_secs);
    w.code(ambiguous, &AMBIGUOUS, ambiguous.as_str());
}

fn unpack_policy(r: &mut Reader<'_>) -> Option<RetryPolicy> {
    Some(RetryPolicy {
        version: r.string()?,
        max_attempts: r.u32()?,
        backoff: match r.u64()? {
            0 => Backoff::Exponential {
                base_secs: r.u64()?,
                cap_secs: r.u64()?,
            },
            1 => {
                let n = r.u64()?;
                let mut schedule_secs = Vec::new();
                for _ in 0..n {
                    schedule_secs.push(r.u64()?);
                }
                Backoff::Schedule { schedule_secs }
            }
            2 => Backoff::Fitted { factor: r.u32()? },
            3 => Backoff::Unknown(serde_json::from_str(r.str()?).ok()?),
            _ => return None,
        },
        freshness_default_secs: r.u64()?,
        max_throttle_deferrals: r.u32()?,
        throttle_base_secs: r.u64()?,
        throttle_cap_secs: r.u64()?,
        ambiguous: r
            .code(&AMBIGUOUS)?
            .unwrap_or_else(|s| AmbiguousRule::Unknown(intern(s))),
    })
}

#[cfg(test)]
#[path = "packed_tests.rs"]
mod tests;
