//! A channel in standby (docs/design.md, "Fallback chain"): in the subscriber's fallback order,
//! behind the first channel the reminder lists. Whether its turn comes is read from the ledger,
//! never from the preferences alone: the chain the deliveries recorded is walked from the head of
//! the order, following each death to the channel it handed on to (`fallback_to`; for a death that
//! named none, or named a channel the reminder no longer lists, the next listed channel in the
//! order). So a change of order or an edit mid-flight cannot leave channels waiting for each
//! other, and a lost fallback message loses nothing: the standby channel's own message finds
//! the death.

use std::collections::{BTreeMap, BTreeSet};

use crate::clock::Timestamp;
use crate::domain::{Channel, DeliveryKey, Preferences, ReminderId, SubscriberId};
use crate::ledger::{DeliveryRecord, Status};
use crate::ports::{Ledger, PortError};

/// What a standby channel does, by the chain on the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// `behind` has not settled (or has no delivery yet): look again after `after` (its
    /// lease's end or next eligible time when it waits for one, else now).
    Wait { after: Timestamp, behind: Channel },
    /// The chain reached this channel: `from` died and handed the reminder on. Send.
    TakeOver { from: Channel },
    /// `because` reached the person, expired, was cancelled, or died for a reason that does
    /// not fall back: this channel is never sent.
    NotNeeded { because: Channel },
}

/// The channels of `prefs`'s fallback order that the reminder lists, in order.
pub fn listed_order(prefs: &Preferences, listed: impl Fn(Channel) -> bool) -> Vec<Channel> {
    prefs
        .fallback
        .iter()
        .copied()
        .filter(|c| listed(*c))
        .collect()
}

/// `None` when `channel` is not in standby (no order, not in it, or at the head of the
/// chain); otherwise its turn, walking the chain from its head.
///
/// The head is the order's first listed channel, unless another channel of the order was
/// already claimed as the head (its first claim said so, [`heads_chain`]): then that one, the
/// earliest such claim, stays the head whatever the order now says (docs/design.md, "Fallback
/// chain": once the head is claimed, a reorder changes nothing for that reminder). A channel that
/// already has an item of its own goes on; its ledger item decides. Whatever the head, no channel
/// of the order is sent once another may have reached the person (`NotNeeded`, the head too), nor
/// while another is in flight (`Wait`): a channel claimed on its own before the order was
/// set, or by a reader of an older order, is judged as the chain's items are.
///
/// A head claimed under an earlier order, which the order as it is now leaves out (cleared,
/// or reordered without it), still holds the channels of the chain its claim recorded
/// ([`behind_recorded_head`]): once the head is claimed, a reorder or a clear changes nothing.
pub async fn turn<L: Ledger>(
    ledger: &L,
    prefs: &Preferences,
    reminder: &ReminderId,
    subscriber: &SubscriberId,
    listed: impl Fn(Channel) -> bool,
    channel: Channel,
    now: Timestamp,
) -> Result<Option<Turn>, PortError> {
    let look = Look {
        ledger,
        prefs,
        reminder,
        subscriber,
        listed,
        channel,
        now,
    };
    let by_order = look.by_order().await?;
    if by_order.is_some() {
        return Ok(by_order);
    }
    look.behind_recorded_head().await
}

/// One channel's look at its chain: what [`turn`] was asked.
struct Look<'a, L, F> {
    ledger: &'a L,
    prefs: &'a Preferences,
    reminder: &'a ReminderId,
    subscriber: &'a SubscriberId,
    listed: F,
    channel: Channel,
    now: Timestamp,
}

impl<L: Ledger, F: Fn(Channel) -> bool> Look<'_, L, F> {
    async fn get(&self, c: Channel) -> Result<Option<DeliveryRecord>, PortError> {
        let key = DeliveryKey::derive(self.reminder, self.subscriber, c);
        self.ledger.get(&key).await
    }

    /// The turn as the order as it is now gives it.
    async fn by_order(&self) -> Result<Option<Turn>, PortError> {
        let (prefs, channel, now, listed) = (self.prefs, self.channel, self.now, &self.listed);
        if !prefs.fallback.contains(&channel) {
            return Ok(None);
        }
        // Every channel of the order, listed or not: one an edit removed after it may have
        // reached the person still has.
        let mut items = BTreeMap::new();
        for &c in prefs.fallback.iter().collect::<BTreeSet<_>>() {
            if let Some(rec) = self.get(c).await? {
                items.insert(c, rec);
            }
        }
        // Whoever heads the chain, and whether or not this channel has an item of its own that
        // could still send (a redrive made it ready again, say): once another channel of the
        // order may have reached the person, this one is never sent. An own item that is
        // sending, dead or settled is the ledger's to decide (a takeover, a DLQ copy).
        let sendable = items.get(&channel).is_none_or(|own| {
            matches!(
                own.status(),
                Status::Scheduled | Status::Ready | Status::Deferred
            )
        });
        let reached = items
            .iter()
            .find(|(c, r)| sendable && **c != channel && r.may_have_reached());
        if let Some((c, _)) = reached {
            return Ok(Some(Turn::NotNeeded { because: *c }));
        }
        if items.contains_key(&channel) {
            // An own item that could still send (released unsent, deferred, made ready again by
            // a redrive) waits while another channel of the order is mid-send: that call may
            // reach the person, and only its answer tells (found by chaos seed 1228). Only a
            // `sending` one: two that wait for each other's retries would never settle.
            let mid_send = items
                .iter()
                .find(|(c, r)| sendable && **c != channel && r.status() == Status::Sending);
            if let Some((c, r)) = mid_send {
                return Ok(Some(waiting(r, *c, now)));
            }
            return Ok(None);
        }
        // While another is in flight (claimed on its own before the order, or ahead in the
        // chain; mid-send, for one no longer listed), this one waits for it to settle.
        let busy = |c: Channel, r: &DeliveryRecord| {
            in_flight(r) && (listed(c) || r.status() == Status::Sending)
        };
        if let Some((c, r)) = items.iter().find(|(c, r)| busy(**c, r)) {
            return Ok(Some(waiting(r, *c, now)));
        }
        let order = listed_order(prefs, listed);
        if order.len() < 2 || !order.contains(&channel) {
            return Ok(None);
        }
        items.retain(|c, _| order.contains(c));
        let head = order
            .iter()
            .filter_map(|c| items.get(c).map(|r| (c, r)))
            .filter(|(_, r)| claimed_as_head(r))
            .min_by_key(|(c, r)| (r.first_seen_at(), c.as_str()))
            .map_or(order[0], |(c, _)| *c);
        Ok(walk(&order, &items, head, channel, listed, now))
    }

    /// Whether a head claimed under an earlier order, that the order as it is now leaves out
    /// (or that leaves `channel` out), holds `channel`: its claim recorded a chain
    /// (`origin.chain`) that holds `channel`. Then no channel of any such chain is sent once
    /// another of them may have reached the person (`NotNeeded`), nor while another is
    /// mid-send, or in flight when `channel` has no item of its own yet (`Wait`). Otherwise
    /// (no such head, or nothing of those chains reached or in flight: the head died and
    /// handed on, say) `None`, as before.
    async fn behind_recorded_head(&self) -> Result<Option<Turn>, PortError> {
        let (prefs, channel, now, listed) = (self.prefs, self.channel, self.now, &self.listed);
        // When the order holds this channel, a head it holds too was read, and judged, by
        // the order: only one the order leaves out is read here. When it does not, any is,
        // listed or not (one an edit removed after it may have reached the person still has).
        let judged = |c: Channel| prefs.fallback.contains(&channel) && prefs.fallback.contains(&c);
        // Every head whose recorded chain holds this channel (an order changed twice may
        // have left two): the channels of all of them are judged.
        let mut chains = BTreeSet::new();
        for c in Channel::ALL {
            if c == channel || judged(c) {
                continue;
            }
            let Some(rec) = self.get(c).await? else {
                continue;
            };
            let Some(origin) = rec.origin().filter(|_| claimed_as_head(&rec)) else {
                continue;
            };
            if origin.chain.contains(&channel) {
                chains.extend(origin.chain.iter().copied().filter(|c| *c != channel));
            }
        }
        if chains.is_empty() {
            return Ok(None);
        }
        let own = self.get(channel).await?;
        if own.as_ref().is_some_and(|own| {
            !matches!(
                own.status(),
                Status::Scheduled | Status::Ready | Status::Deferred
            )
        }) {
            // Sending, dead or settled: the ledger decides, as for the order's channels.
            return Ok(None);
        }
        let mut items = BTreeMap::new();
        for c in chains {
            if let Some(rec) = self.get(c).await? {
                items.insert(c, rec);
            }
        }
        if let Some((c, _)) = items.iter().find(|(_, r)| r.may_have_reached()) {
            return Ok(Some(Turn::NotNeeded { because: *c }));
        }
        // An own item that could still send waits only for one mid-send: two that wait for each
        // other's retries would never settle. One no longer listed is waited for only mid-send.
        let busy = |c: Channel, r: &DeliveryRecord| match own {
            None if listed(c) => in_flight(r),
            _ => r.status() == Status::Sending,
        };
        Ok(items
            .iter()
            .find(|(c, r)| busy(**c, r))
            .map(|(c, r)| waiting(r, *c, now)))
    }
}

/// A claimed delivery that has not settled: it may still send. A status this version does
/// not know (a newer writer's) may be one that sends: waited for, never sent past.
fn in_flight(r: &DeliveryRecord) -> bool {
    matches!(
        r.status(),
        Status::Sending | Status::Scheduled | Status::Ready | Status::Deferred | Status::Unknown(_)
    )
}

/// Wait for `behind`'s item: until its lease ends while it is sending, else until it is
/// next eligible (now, when neither is known).
fn waiting(rec: &DeliveryRecord, behind: Channel, now: Timestamp) -> Turn {
    let t = match rec.status() {
        Status::Sending => rec.lease_expires_at(),
        _ => rec.next_eligible_at(),
    };
    Turn::Wait {
        after: t.map_or(now, |t| t.max(now)),
        behind,
    }
}

/// An item claimed as the head of the fallback order (its first claim said so). A delivery
/// claimed with no order, or outside it, went out on its own and heads nothing.
fn claimed_as_head(r: &DeliveryRecord) -> bool {
    r.origin()
        .is_some_and(|o| o.chain_head && o.fallback_from.is_none())
}

/// Whether a delivery that [`turn`] lets go on (`None`) is claimed as the chain's head: it is
/// in an order of two or more listed channels, and not sent as anyone's fallback.
pub fn heads_chain(
    prefs: &Preferences,
    listed: impl Fn(Channel) -> bool,
    channel: Channel,
) -> bool {
    let order = listed_order(prefs, listed);
    order.len() >= 2 && order.contains(&channel)
}

/// Follow the chain from `head` to `channel`: each death that sent nothing hands on to the
/// channel it named, or else to the first channel of the order not yet visited.
fn walk(
    order: &[Channel],
    items: &BTreeMap<Channel, DeliveryRecord>,
    head: Channel,
    channel: Channel,
    listed: impl Fn(Channel) -> bool,
    now: Timestamp,
) -> Option<Turn> {
    let (mut at, mut from) = (head, None);
    let mut seen = BTreeSet::new();
    loop {
        if at == channel {
            // Only a death hands on: `from` is set once the walk has left the head.
            return from.map(|from| Turn::TakeOver { from });
        }
        if !seen.insert(at) {
            return Some(Turn::NotNeeded { because: at });
        }
        let Some(rec) = items.get(&at) else {
            return Some(Turn::Wait {
                after: now,
                behind: at,
            });
        };
        match rec.status() {
            Status::Delivered | Status::Expired | Status::Cancelled => {
                return Some(Turn::NotNeeded { because: at })
            }
            Status::Sending
            | Status::Scheduled
            | Status::Ready
            | Status::Deferred
            | Status::Unknown(_) => return Some(waiting(rec, at, now)),
            Status::Dead => {
                // Only a death known to have sent nothing hands on (docs/design.md, "Fallback
                // chain").
                let falls_back =
                    rec.dead_reason().is_some_and(|r| r.falls_back()) && !rec.may_have_reached();
                let unseen = |c: &Channel| !seen.contains(c);
                let next = match rec.fallback_to() {
                    _ if !falls_back => None,
                    Some(to) if listed(to) && unseen(&to) => Some(to),
                    _ => order.iter().copied().find(unseen),
                };
                match next {
                    Some(next) => (from, at) = (Some(at), next),
                    None => return Some(Turn::NotNeeded { because: at }),
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "standby_tests.rs"]
mod tests;
