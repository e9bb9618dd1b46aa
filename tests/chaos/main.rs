//! The system checker (`remindctl chaos`): a few hundred seeded worlds keep every promise, with
//! thousands of faults injected; each deliberately planted fault is caught; the seeds that
//! once broke a promise (before the fixes they led to) keep passing; one seed is one run.

use reminders_harness::chaos::{self, Plant, Tally};

fn run(from: u64, seeds: u64, plant: Option<Plant>) -> (Tally, Vec<chaos::SeedReport>) {
    chaos::run(from, seeds, chaos::Worlds::planted(plant), &|_| {})
}

fn assert_kept(total: &Tally, failing: &[chaos::SeedReport]) {
    let first = failing.first().map(|r| (r.seed, r.findings.clone()));
    assert_eq!(
        total.broken(),
        0,
        "{total:?}\nfirst failing seed: {first:?}"
    );
}

/// Of the deliveries neither cancelled nor dead, the share delivered rather than expired;
/// without those of reminders whose freshness a breaker's opening cut short (almost-stale probes),
/// which expire by design.
fn delivered_share(t: &Tally) -> f64 {
    let delivered = t.delivered - t.cut_short_delivered;
    let expired = t.expired - t.cut_short_expired;
    delivered as f64 / (delivered + expired).max(1) as f64
}

/// The floors first, about three quarters of what 300 worlds generate today (delivered 2,037,
/// edits applied 1,980, fallbacks taken 409, the rest in the JSON in docs/performance.md; edits
/// re-adding a channel, 15, at 12), so that a world that stopped generating most of a part of the
/// surface fails even while every promise is kept.
#[test]
fn three_hundred_worlds_keep_every_promise() {
    let (total, failing) = run(0, 300, None);
    let floors: [(&str, u64, u64); 42] = [
        ("delivered", total.delivered, 1_500),
        ("edits_applied", total.edits_applied, 1_450),
        ("edits_due_earlier", total.edits_due_earlier, 135),
        ("edits_due_later", total.edits_due_later, 220),
        ("edits_past_horizon", total.edits_past_horizon, 235),
        ("edits_freshness", total.edits_freshness, 415),
        ("edits_content", total.edits_content, 140),
        ("edits_channel_removed", total.edits_channel_removed, 375),
        ("edits_channel_added", total.edits_channel_added, 275),
        ("edits_channel_readded", total.edits_channel_readded, 12),
        // Edits of stale reminders that still had a delivery to send (a stale edit racing the
        // expiry). An edit of a reminder whose every delivery settled is refused with 409, as the
        // API does, and counted in `edits_refused` instead: 181 and 583 at 300 worlds.
        ("edits_of_stale", total.edits_of_stale, 130),
        ("edits_refused", total.edits_refused, 445),
        // A channel edited away after its enqueue, listed again (345).
        ("readds_refused", total.readds_refused, 260),
        ("fallbacks_taken", total.fallbacks_taken, 305),
        ("redrives_executed", total.redrives_executed, 315),
        ("orders_set", total.orders_set, 790),
        ("reorders", total.reorders, 480),
        ("orders_cleared", total.orders_cleared, 320),
        ("gone_answers", total.gone_answers, 120),
        ("settled_transitions", total.settled_transitions, 6_100),
        ("newer_values_read", total.newer_values_read, 625),
        ("prompted_edits", total.prompted_edits, 1_020),
        // Series: 380 created, 320 edits, 144 skips, 114 cancels and 2,298 occurrences made at
        // 300 worlds.
        ("series_created", total.series_created, 285),
        ("series_edits", total.series_edits, 240),
        ("series_skips", total.series_skips, 107),
        ("series_cancelled", total.series_cancelled, 85),
        ("occurrences_made", total.occurrences_made, 1_720),
        // The one-read path, with half the schedules hashing as the consumers do, a quarter under
        // a rotated key and a quarter not at all (a deploy in progress): 1,997 claims and 1,011
        // of them given back at 300 worlds.
        ("one_read", total.one_read, 1_500),
        ("one_read_released", total.one_read_released, 750),
        // Heads taken out of the order just after their claim (cleared, or set without the
        // head): 244 at 300 worlds.
        ("heads_ordered_away", total.heads_ordered_away, 180),
        // Series started in the past with an instant just before their creation, and edited with
        // that instant still fresh: 151 and 151 at 300 worlds.
        ("series_started_past", total.series_started_past, 110),
        ("past_series_edits", total.past_series_edits, 110),
        // Erasures of a series' subscriber that answered complete while the maker ran (143), and
        // conditional writes of the ledger, the reminders table and the series that took effect,
        // their answer lost and sent again by the SDK (1,260).
        ("erasures", total.erasures, 110),
        ("writes_retried", total.writes_retried, 940),
        // Occurrences put through their own ids before the maker made them: moved earlier from
        // hours ahead (151 at 300 worlds), of which the TTL had deleted 130 by their instant; moved
        // later (104); the puts sent again after a fault (135). Series writes that evicted the
        // oldest occurrences made (230), and reminders the TTL deleted by the world's end (4,474).
        ("unmade_puts_earlier", total.unmade_puts_earlier, 110),
        ("unmade_gone_by_instant", total.unmade_gone_by_instant, 90),
        ("unmade_puts_later", total.unmade_puts_later, 75),
        ("unmade_put_retries", total.unmade_put_retries, 95),
        ("made_evicted", total.made_evicted, 160),
        ("reminder_ttl_passed", total.reminder_ttl_passed, 3_400),
        ("cursors_judged", total.cursors_judged, 2_250),
        ("newer_marks", total.newer_marks, 1_150),
    ];
    for (name, got, floor) in floors {
        assert!(got >= floor, "{name}: {got} < {floor}: {total:?}");
    }
    assert!(
        total.not_needed > 0 && total.cancels_racing_redrives > 0,
        "{total:?}"
    );
    assert_kept(&total, &failing);
    // A floor: an "expire everything" bug keeps every other promise (early-freshness, below,
    // delivers none), so the share delivered is asserted too: 0.78 today. Half the worlds
    // stop their schedule for 8 to 20 minutes (a backlog gone stale), which expires some.
    // Reminders whose freshness the application cut to end seconds after a breaker's cool-down
    // (almost-stale probes) mostly expire by design and are left out of the share (0.66 with
    // them). It was 0.93 before those worlds (floor 0.85), then 0.84, then 0.78 once the series
    // worlds came, 0.77 with those of a channel edited away and listed again.
    assert!(delivered_share(&total) > 0.75, "{total:?}");
    assert!(
        total.cut_short_delivered + total.cut_short_expired > 100,
        "the almost-stale probes' worlds cut freshness short: {total:?}"
    );
    assert_eq!(total.seeds, 300);
    assert!(total.deliveries > 3_000, "{total:?}");
    assert!(total.faults_injected > 10_000, "{total:?}");
    // Ambiguous sends happen, and are flagged rather than repeated.
    assert!(total.flagged_ambiguous > 0, "{total:?}");
}

/// Each of these broke a promise once: a death whose copy failed and whose reminder then went
/// stale was acked without its DLQ copy (196, 165, …); a stale DLQ copy left by a redrive
/// stopped before its delete redrove a later death (2286); a 429 whose worker stopped before
/// recording it (1833) is one the system never heard; a world with maxReceiveCount 12, below
/// the template's minimum of 20, moved a message out while its copy claim was held (5282).
#[test]
fn seeds_that_once_broke_a_promise_keep_them() {
    for seed in [
        46, 125, 134, 165, 188, 196, 197, 203, 260, 286, 288, 787, 917, 1010, 1067, 1177, 1199,
        1228, 1767, 1833, 2286, 5282,
    ] {
        let report = chaos::run_seed(seed, chaos::Worlds::default());
        assert_eq!(
            report.tally.broken(),
            0,
            "seed {seed}: {:?}",
            report.findings
        );
    }
}

#[test]
fn one_seed_is_one_run() {
    let a = chaos::run_seed(42, chaos::Worlds::default());
    let b = chaos::run_seed(42, chaos::Worlds::default());
    assert_eq!(a.tally, b.tally);
    assert!(a.tally.faults_injected > 0);
}

fn caught(plant: Plant, counter: fn(&Tally) -> u64) {
    let (total, failing) = run(0, 100, Some(plant));
    assert!(
        counter(&total) > 0,
        "{} went unnoticed: {total:?}",
        plant.name()
    );
    assert!(!failing.is_empty());
}

#[test]
fn acking_before_the_outcome_is_caught_as_lost() {
    caught(Plant::AckBeforeOutcome, |t| t.lost);
}

#[test]
fn ignoring_retry_after_is_caught_as_early_sends() {
    caught(Plant::IgnoreRetryAfter, |t| t.early_sends);
}

#[test]
fn an_unfenced_ledger_is_caught_as_duplicates() {
    caught(Plant::UnfencedLedger, |t| t.duplicated);
}

#[test]
fn dropping_dead_letters_is_caught_as_deaths_without_copy() {
    caught(Plant::DropDeadLetters, |t| t.dead_without_copy);
}

#[test]
fn a_5xx_classified_permanent_is_caught_as_an_unjustified_ending() {
    caught(Plant::FiveXxPermanent, |t| t.unjustified_endings);
}

/// A gate adapter blind to the breaker: workers charge their attempts against a partition
/// every other worker knows is down, and deliveries die of it during the outage.
#[test]
fn a_gate_blind_to_the_breaker_is_caught_as_deaths_during_an_open_partition() {
    let (total, failing) = run(0, 100, Some(Plant::HideBreaker));
    assert!(total.unjustified_endings > 0, "{total:?}");
    let named = failing
        .iter()
        .flat_map(|r| r.findings.iter())
        .any(|f| f.contains("breaker was open"));
    assert!(named, "the finding names the open breaker");
}

/// Every counter of the JSON has a plant that fires it in 60 worlds; these are the plants the
/// tests above do not run. An early `fresh_until` also sinks the delivered share to nothing,
/// which is what the floor of the 300 worlds is there to catch.
#[test]
fn every_counter_has_a_plant_that_fires_it_in_sixty_worlds() {
    let counters = [
        "lost",
        "duplicated",
        "stale_sends",
        "early_sends",
        "sends_after_cancel",
        "dead_without_copy",
        "extra_dlq_copies",
        "budget_exceeded",
        "unjustified_endings",
        "sent_while_opted_out",
        "sent_in_quiet_hours",
        "expired_while_fresh",
        "two_channels_sent",
        "stranded",
        "acknowledged_change_ignored",
        "event_missing",
        "sent_abroad",
        "occurrence_missing",
        "occurrence_doubled",
        "occurrence_unowed",
        "sent_after_erasure",
        "cursor_leak",
        "newer_attribute_dropped",
    ];
    assert_eq!(
        counters.len(),
        Tally::BROKEN.len(),
        "a counter without its plant"
    );
    for c in counters {
        assert!(
            Plant::ALL.iter().any(|p| p.fires() == c),
            "no plant fires {c}"
        );
    }
    for plant in [
        Plant::LateFreshness,
        Plant::LostCancel,
        Plant::DoubleDeadLetters,
        Plant::ForgetAttempts,
        Plant::EarlyFreshness,
        Plant::StripDeadLetterReason,
    ] {
        if plant == Plant::EarlyFreshness {
            // The delivered share is judged over the 60 worlds, as the 300's floor is.
            let (total, _) = run(0, 60, Some(plant));
            let json = serde_json::to_value(&total).unwrap();
            let fired = json[plant.fires()].as_u64().unwrap();
            assert!(fired > 0, "{} went unnoticed: {total:?}", plant.name());
            assert!(delivered_share(&total) < 0.85, "{total:?}");
        } else {
            fires_within(plant, 60);
        }
    }
}

/// Ten worlds (a second or so): subscribers opt out and set quiet hours mid-run, the consumer
/// heeds them (deliveries end `opted_out`, are held, end `expired_quiet_hours`), and neither
/// recipient verdict fires.
#[test]
fn subscribers_who_change_their_minds_are_heeded() {
    let (total, failing) = run(0, 10, None);
    let first = failing.first().map(|r| (r.seed, r.findings.clone()));
    assert_eq!(total.sent_while_opted_out, 0, "{total:?}\n{first:?}");
    assert_eq!(total.sent_in_quiet_hours, 0, "{total:?}\n{first:?}");
    assert!(total.preference_changes > 0, "{total:?}");
    assert!(total.opted_out > 0, "{total:?}");
    assert!(total.quiet_holds > 0, "{total:?}");
}

/// Each recipient verdict fires in ten worlds when the reminders adapter drops that part of
/// the preferences, and only that verdict.
#[test]
fn ignoring_opt_outs_is_caught_as_sends_while_opted_out() {
    let (total, failing) = run(0, 10, Some(Plant::IgnoreOptOuts));
    assert!(total.sent_while_opted_out > 0, "{total:?}");
    assert_eq!(total.sent_in_quiet_hours, 0, "{total:?}");
    assert!(!failing.is_empty());
}

#[test]
fn ignoring_quiet_hours_is_caught_as_sends_in_quiet_hours() {
    let (total, failing) = run(0, 10, Some(Plant::IgnoreQuietHours));
    assert!(total.sent_in_quiet_hours > 0, "{total:?}");
    assert_eq!(total.sent_while_opted_out, 0, "{total:?}");
    assert!(!failing.is_empty());
}

/// Each new verdict fires within 60 worlds when its plant breaks the piece it watches.
fn fires_in_sixty(plant: Plant) {
    fires_within(plant, 60);
}

/// Runs the plant's worlds from seed 0, a few at a time, until its verdict fires, and fails
/// if it has not within `worlds`. The same verdict as running all of them (a plant fires in
/// `worlds` worlds or it does not), without running the rest once it has: some plants make
/// worlds that run for many virtual hours, and CI runs every plant.
fn fires_within(plant: Plant, worlds: u64) -> Tally {
    const AT_ONCE: u64 = 4;
    let mut total = Tally::default();
    let mut from = 0;
    while from < worlds {
        let (tally, failing) = run(from, AT_ONCE.min(worlds - from), Some(plant));
        total.add(&tally);
        let json = serde_json::to_value(&total).unwrap();
        if json[plant.fires()].as_u64().unwrap() > 0 {
            assert!(
                !failing.is_empty(),
                "{}: fired, yet no world failed",
                plant.name()
            );
            return total;
        }
        from += AT_ONCE;
    }
    panic!(
        "{} went unnoticed in {worlds} worlds: {total:?}",
        plant.name()
    );
}

/// The events adapter drops one event: the settled transition has none.
#[test]
fn a_dropped_event_is_caught_as_event_missing() {
    fires_in_sixty(Plant::DropEvent);
}

/// The reminders adapter drops an edit's change of freshness: the pipeline expires on the
/// old one what the API acknowledged fresh.
#[test]
fn a_freshness_edit_never_stored_is_caught_as_expired_while_fresh() {
    fires_in_sixty(Plant::DropFreshnessEdit);
}

/// The reminders adapter drops the channels an edit adds: acknowledged, never sent, no why.
#[test]
fn channels_an_edit_added_never_stored_are_caught_as_acknowledged_change_ignored() {
    fires_in_sixty(Plant::DropAddedChannels);
}

/// The reminders adapter reads preferences without their fallback order: every channel goes.
#[test]
fn ignoring_the_fallback_order_is_caught_as_two_channels_sent() {
    fires_in_sixty(Plant::IgnoreFallbackOrder);
}

/// The queue adapter loses a fallback's message and the standby's own: the chain strands.
#[test]
fn lost_fallback_messages_are_caught_as_stranded() {
    fires_in_sixty(Plant::LoseFallbackMessages);
}

/// A newer writer's value in a field the events function refuses; the item is skipped, and its
/// settled transition has no event.
#[test]
fn a_skipped_newer_value_is_caught_as_event_missing() {
    fires_in_sixty(Plant::RefuseNewerValues);
}

/// A dead address after an ambiguous attempt: the ledger adapter reads items without `maybe_sent`
/// (and the history that shows it); after an ambiguous attempt and a 410 at the retry, the next
/// channel of the order takes over and reaches the person a second time.
#[test]
fn a_forgotten_maybe_sent_is_caught_as_two_channels_sent() {
    fires_in_sixty(Plant::ForgetMaybeSent);
}

/// A stale edit racing the expiry: the reminders adapter marks an expiry on the version stored, not
/// the one the scheduler read; a stale reminder edited fresh while the scheduler held its page is
/// expired although the API acknowledged it fresh.
#[test]
fn an_expiry_over_an_edit_is_caught_as_expired_while_fresh() {
    fires_in_sixty(Plant::ExpireOverAnEdit);
}

/// An edit past the TTL horizon: the ledger adapter drops horizon moves of unsettled items; a send
/// whose worker stopped, then an edit hours out, and the TTL takes the proof: sent again.
#[test]
fn a_horizon_kept_for_unsettled_items_is_caught_as_duplicated() {
    fires_in_sixty(Plant::KeepOldHorizon);
}

/// Almost-stale probes: the last look after the breaker's probe write reads the time from
/// before that write; a probe that went stale while its write was slow is sent. The probe must
/// go stale inside its slow write, which few worlds line up: 5 of the first 120 worlds and none of
/// the first 60, once ledger writes could be sent again by the SDK (whose backoff moves every later
/// moment of a world); 1 of the first 60 before. `stale_sends` itself fires within 60 worlds
/// from `late-freshness`.
#[test]
fn a_last_look_before_the_probe_write_is_caught_as_stale_sends() {
    fires_within(Plant::StaleLastLook, 120);
}

/// A consumer deployed without its SMS allow-list sends the numbers edits moved abroad.
#[test]
fn a_consumer_without_its_allow_list_is_caught_as_sent_abroad() {
    fires_in_sixty(Plant::IgnoreCountries);
}

/// A take-over from a death that named no channel: the ledger adapter acknowledges a standby's
/// hand-on without writing it; with the order cleared before the redrive, nothing else refuses the
/// redriven channel that handed on, and it reaches the person a second time. Catching it needs a
/// `rejected` death that named no channel, a take-over, a cleared order and a redrive that finds
/// the copy: the take-over worlds line them up (docs/testing.md, "Proving it").
#[test]
fn a_lost_hand_on_is_caught_as_two_channels_sent() {
    fires_in_sixty(Plant::LostHandOn);
}

/// A reorder at the head's first claim, both closings undone: the consumer's ledger adapter reads
/// items without `chain_head`, and none of another channel's that has not died. With the head moved
/// to the end of the order as it is claimed, the channel now first goes as well.
#[test]
fn a_reorder_after_the_head_was_claimed_is_caught_as_two_channels_sent() {
    fires_in_sixty(Plant::ReorderSendsBoth);
}

/// Heads that die out of budget: the queue adapter answers a fallback's message sent and drops it.
/// A head whose address failed until its budget was spent (its standby acknowledged as not
/// needed), opted out of and redriven, dies handing on; nothing else sends the standby.
#[test]
fn a_best_effort_fallback_after_a_redrive_is_caught_as_stranded() {
    fires_in_sixty(Plant::FallbackBestEffort);
}

/// The ledger adapter reads items without the chain a head's first claim recorded: a head
/// taken out of the order just after its claim (the order cleared, or set without it) no
/// longer holds the channel behind it, which goes beside it.
#[test]
fn a_chain_forgotten_when_the_head_leaves_the_order_is_caught_as_two_channels_sent() {
    fires_in_sixty(Plant::ForgetRecordedChain);
}

/// The series adapter writes a series without `owed_after`: a series created with its
/// `starts_at` in the past, edited while an instant of its rule from before its creation is still
/// fresh, makes that instant and sends it.
#[test]
fn an_edit_that_makes_an_instant_from_before_the_series_existed_is_caught_as_occurrence_unowed() {
    fires_in_sixty(Plant::ForgetOwedAfter);
}

/// The series adapter answers a subscriber's series as none: the erasure neither cancels nor
/// deletes the series, and the maker goes on making and sending its occurrences after the erasure
/// answered complete.
#[test]
fn an_erasure_that_misses_a_series_is_caught_as_sent_after_erasure() {
    fires_in_sixty(Plant::EraseMissesSeries);
}

/// The series adapter writes a series without the instants made through their own ids: an
/// occurrence moved from hours ahead to minutes from now is sent, its items go with their TTL,
/// and the maker reaching its instant makes and sends it again.
#[test]
fn an_occurrence_made_on_its_own_made_again_after_its_ttl_is_caught_as_duplicated() {
    fires_in_sixty(Plant::ForgetDetached);
}

/// The ledger's writes leave out what this version does not know: the attributes a newer
/// version, writing beside this one, added to an item are gone after this version's next write.
#[test]
fn a_writer_that_drops_a_newer_versions_attributes_is_caught() {
    fires_in_sixty(Plant::DropUnknown);
}

/// List cursors handed out unsealed: an application listing a subscriber it shares with another
/// gets a cursor that names the other's series, left out of its page, in plain base64.
#[test]
fn a_list_cursor_handed_out_unsealed_is_caught_as_cursor_leak() {
    fires_in_sixty(Plant::PlainCursor);
}

/// A channel edited away and listed again: the reminders adapter reads a reminder without the
/// channels it enqueued and no longer lists; a channel taken away right after the enqueue (its
/// delivery cancelled as edited away) and listed again minutes later is acknowledged and never
/// sent.
#[test]
fn a_readded_channel_accepted_is_caught_as_acknowledged_change_ignored() {
    fires_in_sixty(Plant::ForgetEditedAway);
}

/// The series adapter records the maker's progress an hour further than it made; the occurrences
/// in between are never made.
#[test]
fn progress_recorded_ahead_of_the_maker_is_caught_as_occurrence_missing() {
    fires_in_sixty(Plant::SkipAhead);
}

/// The series adapter drops the occurrences a series made; an edit no longer finds one a backlog
/// still holds, and the old time goes late beside the new one.
#[test]
fn occurrences_forgotten_by_the_series_adapter_are_caught_as_occurrence_doubled() {
    fires_in_sixty(Plant::ForgetMade);
}
