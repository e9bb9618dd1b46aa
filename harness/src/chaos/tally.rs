//! What a set of worlds came to: the counters of `remindctl chaos --json`. Each field is
//! named once, in [`tally!`]: either a broken promise (summed by [`Tally::broken`], each must
//! be 0) or a description of the worlds (how deliveries ended, what the worlds generated).

use serde::Serialize;

macro_rules! tally {
    (
        broken { $($(#[$bm:meta])* $b:ident,)* }
        reported { $($(#[$rm:meta])* $r:ident,)* }
    ) => {
        /// What a set of worlds came to: [`Tally::broken`] sums the fields that count broken
        /// promises (each must be 0); the others describe the worlds.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
        pub struct Tally {
            pub seeds: u64,
            $($(#[$rm])* pub $r: u64,)*
            $($(#[$bm])* pub $b: u64,)*
        }

        impl Tally {
            /// The names of the counters of broken promises, as the JSON spells them.
            pub const BROKEN: &'static [&'static str] = &[$(stringify!($b)),*];

            pub fn broken(&self) -> u64 {
                0 $(+ self.$b)*
            }

            pub fn add(&mut self, o: &Tally) {
                self.seeds += o.seeds;
                $(self.$r += o.$r;)*
                $(self.$b += o.$b;)*
            }
        }
    };
}

tally! {
    broken {
        /// Deliveries that ended neither delivered, dead with a reason, expired nor cancelled.
        lost,
        /// Sent again after the ledger recorded the delivery, or accepted twice by a provider
        /// that ignores idempotency keys without an operator having accepted that risk.
        duplicated,
        stale_sends,
        early_sends,
        sends_after_cancel,
        /// Provider calls for a channel the subscriber opted out of before the delivery's
        /// claim (and had not opted back in by the call).
        sent_while_opted_out,
        /// Provider calls at an instant inside the channel's quiet hours in force at the claim.
        sent_in_quiet_hours,
        /// SMS provider calls to a number outside the deployed `SMS_ALLOWED_COUNTRY_CODES`.
        sent_abroad,
        dead_without_copy,
        /// DLQ copies telling of a death other than the delivery's one (a copy per message
        /// seen, a stale copy with a new `dead_at`): what would make a reader count deaths
        /// twice.
        extra_dlq_copies,
        budget_exceeded,
        /// Endings without their cause: cancelled with no cancel asked, dead as `rejected`
        /// with no permanent answer, `attempts_exhausted` or `throttle_exhausted` with budget
        /// left, a data error on a valid reminder.
        unjustified_endings,
        /// An `expired` ending written while every version of the reminder the API had
        /// acknowledged last (and any edit of unknown outcome since) was still fresh.
        expired_while_fresh,
        /// A second channel of the subscriber's fallback order reached the provider for one
        /// reminder after a first one's send was accepted or may have been (its answer was
        /// not a definite refusal), while every order readable since its claim held both, or
        /// after the first was claimed as the head of an order that held the second.
        two_channels_sent,
        /// Once the world quiesced past every deadline: a channel in standby of an
        /// acknowledged reminder neither settled, nor waiting for a time ahead, nor made
        /// unneeded by the chain ahead of it, and no alarm metric counted it.
        stranded,
        /// A channel an acknowledged edit added or re-added (and no later acknowledged edit
        /// removed) that ends with no provider call and no reason a `GET` would show.
        acknowledged_change_ignored,
        /// A settled transition the checker saw land on the ledger with no outcome event on
        /// the bus by the world's end.
        event_missing,
        /// An occurrence the series (as last acknowledged, not cancelled) makes inside the
        /// world's horizon, not skipped, that was never made, or made and neither sent, nor
        /// expired, dead or cancelled with its reason.
        occurrence_missing,
        /// An occurrence claimed for a send after an acknowledged write of its series (an
        /// edit, a cancel) that no longer makes it: the old time went as well as the new.
        occurrence_doubled,
        /// An occurrence sent for an instant before its series existed (before the application
        /// first asked to write it): made by a `starts_at` in the past, at the creation or by an
        /// edit. A send after the series' cancel is `occurrence_doubled`'s; twice for one instant,
        /// `duplicated`'s.
        occurrence_unowed,
        /// Once an erasure of a subscriber answered complete: a provider call for one of their
        /// series' occurrences, or an occurrence of it still to be sent in the table.
        sent_after_erasure,
        /// A list page that showed its caller another owner's item, or a cursor that revealed
        /// one (decoded as anyone can), opened for another caller or list, or was accepted
        /// altered.
        cursor_leak,
        /// An item a newer version had added attributes to, still on the ledger at the world's
        /// end without them: a writer of this version dropped what it does not know.
        newer_attribute_dropped,
    }
    reported {
        deliveries,
        /// How the deliveries ended (a world where nothing is delivered is not green by
        /// default).
        delivered,
        expired,
        /// Of the delivered and the expired: deliveries of reminders whose freshness the
        /// application cut to end seconds after a breaker's cool-down (almost-stale probes), which
        /// mostly expire by design; the delivered share is judged without them.
        cut_short_delivered,
        cut_short_expired,
        cancelled,
        dead,
        /// Of the dead: the recipient's choice (no DLQ copy), by reason.
        opted_out,
        expired_quiet_hours,
        suppressed,
        /// Of the dead: SMS numbers outside the allowed calling codes (an edit moved them
        /// abroad), never sent.
        country_not_allowed,
        /// Edits that moved a reminder's SMS number outside the allowed calling codes.
        edits_sms_abroad,
        /// Channels in standby whose turn never came (the chain ahead ended without them).
        not_needed,
        /// Times a delivery was held until its channel's quiet hours ended.
        quiet_holds,
        /// Preferences written mid-run (opt-outs, quiet hours, fallback orders).
        preference_changes,
        /// Of them, fallback orders set, reordered (a non-empty order replaced by another) and
        /// cleared.
        orders_set,
        reorders,
        orders_cleared,
        /// Deaths that handed the reminder on to a fallback channel (`fallback_to`).
        fallbacks_taken,
        /// Provider answers declaring an address dead (410).
        gone_answers,
        /// Edits the API acknowledged, and of them the ones that moved the due time (earlier,
        /// later, past the ledger's TTL horizon), changed the freshness or the content,
        /// removed a channel, added one, or added back one an earlier edit removed.
        edits_applied,
        edits_due_earlier,
        edits_due_later,
        edits_past_horizon,
        edits_freshness,
        edits_content,
        edits_channel_removed,
        edits_channel_added,
        edits_channel_readded,
        /// Edits of reminders already past their `fresh_until`.
        edits_of_stale,
        /// Edits the API refused with `409` because every delivery of the reminder had
        /// settled (nothing left for the edit to send).
        edits_refused,
        /// Edits the API refused with `409` because they listed again a channel an earlier
        /// edit took away after it was enqueued.
        readds_refused,
        /// `dead → ready` moves by operator redrives, and redrive runs with a cancel racing.
        redrives_executed,
        cancels_racing_redrives,
        /// Edits made at a window's moment and accepted by the API: a stale reminder edited
        /// while the scheduler held its page, a reminder moved past the horizon after a send
        /// whose worker stopped, an order added after a death alone, a freshness cut at a
        /// breaker's opening.
        prompted_edits,
        /// Settled transitions seen on the ledger (each must have its event).
        settled_transitions,
        /// Deaths a newer writer recorded with values this version does not know (a third of
        /// the worlds): each must be published with its reason as written.
        newer_values_read,
        /// Stranded channels an alarm metric counted (invariant errors, panics): reported.
        stranded_alarmed,
        faults_injected,
        /// Deliveries the ledger flags as possibly sent (dead/ambiguous), or sent twice after
        /// an operator redrove them out of `ambiguous` with `accept_duplicates`.
        flagged_ambiguous,
        /// Copies of one death made twice, because a worker stopped between sending the copy
        /// and recording it (standard SQS cannot deduplicate): same key, same `dead_at`:
        /// `dlq summary` counts them as one death, and the ledger keeps a redrive of both
        /// single. Reported, not a broken promise.
        duplicate_copies,
        /// Made `ready` by a redrive run that stopped before re-enqueueing: the copy of its
        /// last death is still in the DLQ, and the next redrive of its reason resends it.
        awaiting_redrive,
        /// Copies of an earlier death, since redriven, left because a redrive run stopped
        /// between its re-enqueue and its delete; a later run skips them.
        stale_copies,
        /// Series the application created, edited, skipped an occurrence of and cancelled
        /// (half the worlds), and the occurrences made of them.
        series_created,
        series_edits,
        series_skips,
        series_cancelled,
        occurrences_made,
        /// Series created with their `starts_at` in the past and an instant of their rule just
        /// before their creation, and the edits of them that kept that instant in the rule.
        series_started_past,
        past_series_edits,
        /// Sole messages the consumers claimed first and read once (the one-read path), and of them
        /// the claims given back because the reminder as read was not what the message said (an
        /// edit, a cancel, a rotated key's hash): those went the two-read way.
        one_read,
        one_read_released,
        /// Chains whose head, just claimed, the subscriber took out of the fallback order
        /// (the order cleared, or set without the head): the chain its claim recorded stands.
        heads_ordered_away,
        /// Conditional writes that took effect, their answer lost, and that the SDK sent again
        /// after a backoff: the caller hears the retry's answer. Every conditional write of the
        /// ledger (claims, outcomes, give-backs), the reminders table (creates, edits, marks,
        /// freshness extensions) and the series (the maker's, an edit's, a detach).
        writes_retried,
        /// Erasures of a series' subscriber that answered complete while the maker and the
        /// consumers ran, and the occurrences left in the table after them, cancelled (a maker
        /// that read the series before the erasure cancels what it made; the item stays until
        /// its TTL).
        erasures,
        erased_items_kept,
        /// Occurrences of a series the application put through their own ids before the maker
        /// made them, moved earlier (hours ahead, to minutes from now) and later, and the puts it
        /// sent again after a fault (the series' write inside may have landed).
        unmade_puts_earlier,
        unmade_puts_later,
        unmade_put_retries,
        /// Of the occurrences put earlier, those whose reminder the table's TTL had deleted when
        /// their instant came (the maker reached it with nothing there).
        unmade_gone_by_instant,
        /// Reminders the table's TTL had deleted by the world's end.
        reminder_ttl_passed,
        /// Series writes that kept only the latest occurrences made, the oldest evicted.
        made_evicted,
        /// Cursors the lists of a subscriber whom applications share handed out, each judged.
        cursors_judged,
        /// Ledger items a newer version, writing beside this one, added attributes of its own
        /// to (a third of the worlds), each judged at the world's end.
        newer_marks,
    }
}
