//! The plants: each a deliberately broken piece of the system, named after the verdict that
//! must fire on it (`remindctl chaos --plant NAME`).

/// A deliberately broken piece, to show the checker catches what it claims to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// The event source glue deletes each message as soon as it is received, before its
    /// outcome is recorded.
    AckBeforeOutcome,
    /// The provider adapter drops the Retry-After of a 429.
    IgnoreRetryAfter,
    /// The ledger adapter writes without its condition: no fencing of claims or outcomes.
    UnfencedLedger,
    /// The dead-letter adapter reports success without sending the copy.
    DropDeadLetters,
    /// The provider adapter classifies a 5xx as permanent.
    FiveXxPermanent,
    /// The gate adapter reads the throttle but not the breaker (an adapter that never learned
    /// the breaker's attributes): workers charge attempts against a provider known down.
    HideBreaker,
    /// The reminders adapter reads `fresh_until` a day late (a unit mistake in a decoder).
    LateFreshness,
    /// The ledger adapter acknowledges a cancel without writing it, and the reminders
    /// adapter reads a cancelled reminder as still enqueued.
    LostCancel,
    /// The dead-letter adapter sends every copy twice.
    DoubleDeadLetters,
    /// The ledger adapter reads a waiting delivery's attempt count as zero.
    ForgetAttempts,
    /// The reminders adapter reads `fresh_until` an hour early.
    EarlyFreshness,
    /// The dead-letter adapter drops a copy's reason and evidence.
    StripDeadLetterReason,
    /// The reminders adapter reads a subscriber's preferences without their opt-outs.
    IgnoreOptOuts,
    /// The reminders adapter reads a subscriber's preferences without their quiet hours.
    IgnoreQuietHours,
    /// The events bus adapter answers the world's first event published and never sends it.
    DropEvent,
    /// The reminders adapter writes an edit without a change of `fresh_until` alone (an
    /// update expression that sets it only with the due time): the API acknowledges a
    /// freshness the pipeline never reads.
    DropFreshnessEdit,
    /// The reminders adapter writes an edit without the channels it adds (only the
    /// recipients the stored item already has): the API acknowledges channels never stored.
    DropAddedChannels,
    /// The reminders adapter reads a subscriber's preferences without their fallback order:
    /// every channel goes at once.
    IgnoreFallbackOrder,
    /// The queue adapter loses a fallback's message, and the standby channel's own message
    /// of the same delivery when it next comes back.
    LoseFallbackMessages,
    /// A newer ledger writer, its fix undone: in worlds with a newer writer, its new value lands in
    /// `status`, and the events function skips the item as the old one did (reads it, publishes
    /// nothing).
    RefuseNewerValues,
    /// A dead address after an ambiguous attempt, its fix undone: the ledger adapter reads an item
    /// without `maybe_sent` and the history that shows it (an adapter that never learned them), so
    /// a fallback takes over from a death that may have reached the person.
    ForgetMaybeSent,
    /// A stale edit racing the expiry, its fix undone: the reminders adapter marks an expiry on
    /// whatever version is stored, not the one the scheduler read: an edit that made the reminder
    /// fresh again while the scheduler held its page is expired.
    ExpireOverAnEdit,
    /// An edit past the TTL horizon, its fix undone: the ledger adapter acknowledges a horizon move
    /// and drops it unless the item has settled: an unsettled delivery's proof goes with its old
    /// TTL.
    KeepOldHorizon,
    /// Almost-stale probes, their fix undone: the consumer's last look after the breaker's probe
    /// write reads the time from before that write (slow, up to the storage timeout), so a probe
    /// that went stale meanwhile is sent.
    StaleLastLook,
    /// The consumer deployed without its SMS allow-list (`SMS_ALLOWED_COUNTRY_CODES` read
    /// as `*`): a number an edit moved abroad is sent.
    IgnoreCountries,
    /// The ledger adapter acknowledges a standby's hand-on without writing it, so a redrive of
    /// the death it took over from is not refused. It also reads items without the chain a
    /// head's claim recorded ([`Plant::ForgetRecordedChain`]), which since refuses that
    /// redriven head as well: the hand-on must be lost on both counts for the send to go.
    LostHandOn,
    /// The series adapter records the maker's progress an hour further than it made, so the
    /// occurrences in between are never made.
    SkipAhead,
    /// The series adapter writes a series without the occurrences it made (an attribute it never
    /// learned), so an edit no longer finds one a backlog still holds: the old time goes late,
    /// beside the new one.
    ForgetMade,
    /// A channel edited away and listed again, its fix undone: the reminders adapter reads a
    /// reminder without the channels it enqueued and no longer lists (an attribute it reads only
    /// for listed channels), and the ledger adapter reads a cancelled item as none outside the
    /// consumers (the edit's look at the channels it adds), so an edit that lists again a channel
    /// edited away after its enqueue is acknowledged, and its delivery, cancelled as edited away,
    /// never sends.
    ForgetEditedAway,
    /// A reorder at the head's first claim, both of its closings undone: the consumer's ledger
    /// adapter reads items without `chain_head` (an attribute it never learned), and answers none
    /// for another channel's item that has not died (a read scoped to the consumer's own channel).
    /// A channel a reorder made first in the order goes while the head it was behind is in
    /// flight or has reached the person.
    ReorderSendsBoth,
    /// Heads that die out of budget, their fix undone: the queue adapter answers a fallback's
    /// message sent and drops it, as a best-effort enqueue whose failure nobody takes up again (the
    /// standby channel's own message still comes): after a redrive, a standby already acknowledged
    /// as not needed is never sent.
    FallbackBestEffort,
    /// The window where a head's claim meets a change of order re-opened: the consumer's
    /// ledger adapter reads items without `origin.chain` (an attribute it never learned), so
    /// a head taken out of the order just after its claim (the order cleared, or set without
    /// it) no longer holds the channels behind it: one goes while the head is in flight or
    /// after it reached the person.
    ForgetRecordedChain,
    /// A series created with its `starts_at` in the past, its fix undone: the series adapter
    /// writes a series without `owed_after` (an attribute it never learned), so an edit brings
    /// in line, and makes, an instant of the rule from before the series existed, still fresh.
    ForgetOwedAfter,
    /// An erasure that misses the subscriber's series: the series adapter answers a
    /// subscriber's series as none (an index the erasure reads that never learned them), so the
    /// series stays active and the maker goes on making occurrences after the erasure answered
    /// complete.
    EraseMissesSeries,
    /// An occurrence made through its own id, its fix undone: the series adapter writes a series
    /// without `detached` (an attribute it never learned), so the maker makes again an instant
    /// whose occurrence was moved earlier, sent, and gone with its TTL, and a cancel misses one
    /// moved later.
    ForgetDetached,
    /// List cursors handed out unsealed: the store's position as it is, which names the last
    /// item read, another owner's series left out of the page (what the lists answered before
    /// their cursors were sealed).
    PlainCursor,
    /// A ledger writer that drops what it does not know: the attributes a newer version added to
    /// an item are gone from the next state this version writes (before writers kept them).
    DropUnknown,
}

impl Plant {
    pub const ALL: [Plant; 37] = [
        Plant::AckBeforeOutcome,
        Plant::IgnoreRetryAfter,
        Plant::UnfencedLedger,
        Plant::DropDeadLetters,
        Plant::FiveXxPermanent,
        Plant::HideBreaker,
        Plant::LateFreshness,
        Plant::LostCancel,
        Plant::DoubleDeadLetters,
        Plant::ForgetAttempts,
        Plant::EarlyFreshness,
        Plant::StripDeadLetterReason,
        Plant::IgnoreOptOuts,
        Plant::IgnoreQuietHours,
        Plant::DropEvent,
        Plant::DropFreshnessEdit,
        Plant::DropAddedChannels,
        Plant::IgnoreFallbackOrder,
        Plant::LoseFallbackMessages,
        Plant::RefuseNewerValues,
        Plant::ForgetMaybeSent,
        Plant::ExpireOverAnEdit,
        Plant::KeepOldHorizon,
        Plant::StaleLastLook,
        Plant::IgnoreCountries,
        Plant::LostHandOn,
        Plant::SkipAhead,
        Plant::ForgetMade,
        Plant::ForgetEditedAway,
        Plant::ReorderSendsBoth,
        Plant::FallbackBestEffort,
        Plant::ForgetRecordedChain,
        Plant::ForgetOwedAfter,
        Plant::EraseMissesSeries,
        Plant::ForgetDetached,
        Plant::PlainCursor,
        Plant::DropUnknown,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Plant::AckBeforeOutcome => "ack-before-outcome",
            Plant::IgnoreRetryAfter => "ignore-retry-after",
            Plant::UnfencedLedger => "unfenced-ledger",
            Plant::DropDeadLetters => "drop-dead-letters",
            Plant::FiveXxPermanent => "5xx-permanent",
            Plant::HideBreaker => "hide-breaker",
            Plant::LateFreshness => "late-freshness",
            Plant::LostCancel => "lost-cancel",
            Plant::DoubleDeadLetters => "double-dead-letters",
            Plant::ForgetAttempts => "forget-attempts",
            Plant::EarlyFreshness => "early-freshness",
            Plant::StripDeadLetterReason => "strip-dead-letter-reason",
            Plant::IgnoreOptOuts => "ignore-opt-outs",
            Plant::IgnoreQuietHours => "ignore-quiet-hours",
            Plant::DropEvent => "drop-event",
            Plant::DropFreshnessEdit => "drop-freshness-edit",
            Plant::DropAddedChannels => "drop-added-channels",
            Plant::IgnoreFallbackOrder => "ignore-fallback-order",
            Plant::LoseFallbackMessages => "lose-fallback-messages",
            Plant::RefuseNewerValues => "refuse-newer-values",
            Plant::ForgetMaybeSent => "forget-maybe-sent",
            Plant::ExpireOverAnEdit => "expire-over-an-edit",
            Plant::KeepOldHorizon => "keep-old-horizon",
            Plant::StaleLastLook => "stale-last-look",
            Plant::IgnoreCountries => "ignore-countries",
            Plant::LostHandOn => "lost-hand-on",
            Plant::SkipAhead => "skip-ahead",
            Plant::ForgetMade => "forget-made",
            Plant::ForgetEditedAway => "forget-edited-away",
            Plant::ReorderSendsBoth => "reorder-sends-both",
            Plant::FallbackBestEffort => "fallback-best-effort",
            Plant::ForgetRecordedChain => "forget-recorded-chain",
            Plant::ForgetOwedAfter => "forget-owed-after",
            Plant::EraseMissesSeries => "erase-misses-series",
            Plant::ForgetDetached => "forget-detached",
            Plant::PlainCursor => "plain-cursor",
            Plant::DropUnknown => "drop-unknown",
        }
    }

    /// The verdict (a counter of the JSON) this plant is built to fire.
    pub const fn fires(self) -> &'static str {
        match self {
            Plant::AckBeforeOutcome => "lost",
            Plant::IgnoreRetryAfter => "early_sends",
            Plant::UnfencedLedger => "duplicated",
            Plant::DropDeadLetters => "dead_without_copy",
            Plant::FiveXxPermanent => "unjustified_endings",
            Plant::HideBreaker => "unjustified_endings",
            Plant::LateFreshness => "stale_sends",
            Plant::LostCancel => "sends_after_cancel",
            Plant::DoubleDeadLetters => "extra_dlq_copies",
            Plant::ForgetAttempts => "budget_exceeded",
            Plant::EarlyFreshness => "unjustified_endings",
            Plant::StripDeadLetterReason => "dead_without_copy",
            Plant::IgnoreOptOuts => "sent_while_opted_out",
            Plant::IgnoreQuietHours => "sent_in_quiet_hours",
            Plant::DropEvent => "event_missing",
            Plant::DropFreshnessEdit => "expired_while_fresh",
            Plant::DropAddedChannels => "acknowledged_change_ignored",
            Plant::IgnoreFallbackOrder => "two_channels_sent",
            Plant::LoseFallbackMessages => "stranded",
            Plant::RefuseNewerValues => "event_missing",
            Plant::ForgetMaybeSent => "two_channels_sent",
            Plant::ExpireOverAnEdit => "expired_while_fresh",
            Plant::KeepOldHorizon => "duplicated",
            Plant::StaleLastLook => "stale_sends",
            Plant::IgnoreCountries => "sent_abroad",
            Plant::LostHandOn => "two_channels_sent",
            Plant::SkipAhead => "occurrence_missing",
            Plant::ForgetMade => "occurrence_doubled",
            Plant::ForgetEditedAway => "acknowledged_change_ignored",
            Plant::ReorderSendsBoth => "two_channels_sent",
            Plant::FallbackBestEffort => "stranded",
            Plant::ForgetRecordedChain => "two_channels_sent",
            Plant::ForgetOwedAfter => "occurrence_unowed",
            Plant::EraseMissesSeries => "sent_after_erasure",
            Plant::ForgetDetached => "duplicated",
            Plant::PlainCursor => "cursor_leak",
            Plant::DropUnknown => "newer_attribute_dropped",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}
