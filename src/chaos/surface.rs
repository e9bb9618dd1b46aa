//! The application's and the operator's side of a world: edits of every field the API takes
//! (the due time earlier, later and past the ledger's TTL horizon, the freshness either way,
//! the content, a channel removed, added or added back, edits of stale reminders), cancels,
//! invalid items, and redrives of every reason, two at once and with a cancel racing each —
//! each call an invocation a crash can stop at any port call, as the API's and redrive's
//! Lambdas can be.
//!
//! [`Acks`] keeps what the checker needs of it: every version of a reminder that landed in the
//! reminders table (the table adapter tells it), and the versions the API acknowledged.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::inject::invoke;
use super::journal::Journal;
use super::world::{recipient, World, CHAOS};
use super::Plant;
use crate::clock::{Clock, Timestamp};
use crate::domain::{Channel, Content, DeadReason, Reminder, ReminderId};
use crate::outbox::{self, Edit, Edited};
use crate::ports::faults::lock;
use crate::redrive::{RedriveConfig, RedriveRequest, Redriver};

/// An API call's invocation timeout.
const API_TIMEOUT: Duration = Duration::from_secs(30);

/// What one edit changed (several at once, as a PUT of the whole body does).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kinds {
    pub due_earlier: bool,
    pub due_later: bool,
    pub past_horizon: bool,
    pub freshness: bool,
    pub content: bool,
    pub removed: bool,
    pub added: bool,
    pub readded: bool,
    pub of_stale: bool,
}

/// One version of a reminder that landed in the table.
#[derive(Debug, Clone)]
pub struct Landed {
    pub seq: u64,
    pub payload_version: u64,
    pub fresh_until: Timestamp,
    pub channels: BTreeSet<Channel>,
}

/// One version the API acknowledged (a create, or an edit answered `Edited`).
#[derive(Debug, Clone)]
pub struct Acked {
    pub reminder: Reminder,
    pub kinds: Kinds,
}

#[derive(Default)]
pub struct Acks {
    landed: Mutex<BTreeMap<ReminderId, Vec<Landed>>>,
    acked: Mutex<BTreeMap<ReminderId, Vec<Acked>>>,
}

impl Acks {
    /// A version of `r` landed in the table (an insert or a replace that applied).
    pub fn landed(&self, journal: &Journal, r: &Reminder) {
        let l = Landed {
            seq: journal.next_seq(),
            payload_version: r.payload_version,
            fresh_until: r.fresh_until,
            channels: r.listed_channels().collect(),
        };
        lock(&self.landed)
            .entry(r.reminder_id.clone())
            .or_default()
            .push(l);
    }

    fn acknowledged(&self, journal: &Journal, r: &Reminder, kinds: Kinds) {
        // Numbered, so that the order of acknowledgments and landings is one.
        let _ = journal.next_seq();
        let a = Acked {
            reminder: r.clone(),
            kinds,
        };
        lock(&self.acked)
            .entry(r.reminder_id.clone())
            .or_default()
            .push(a);
    }

    pub fn landed_versions(&self, id: &ReminderId) -> Vec<Landed> {
        lock(&self.landed).get(id).cloned().unwrap_or_default()
    }

    pub fn acked_versions(&self, id: &ReminderId) -> Vec<Acked> {
        lock(&self.acked).get(id).cloned().unwrap_or_default()
    }

    /// Every acknowledged edit (creations left out).
    pub fn edits(&self) -> Vec<Kinds> {
        let acked = lock(&self.acked);
        acked
            .values()
            .flat_map(|v| v.iter().skip(1).map(|a| a.kinds))
            .collect()
    }
}

/// A reminder the world created (before its clock starts): landed and acknowledged.
pub(super) fn created(world: &World, r: &Reminder) {
    world.acks.landed(&world.journal, r);
    world.acks.acknowledged(&world.journal, r, Kinds::default());
}

/// What a planted reminders adapter writes instead of `r` over `stored`.
pub fn planted_write(plant: Plant, stored: &Reminder, r: &Reminder) -> Reminder {
    let mut w = r.clone();
    match plant {
        Plant::DropFreshnessEdit if w.due_at == stored.due_at => {
            w.fresh_until = stored.fresh_until;
        }
        Plant::DropAddedChannels => {
            w.recipients
                .retain(|c, _| stored.recipients.contains_key(c));
            if w.recipients.is_empty() {
                w.recipients = r.recipients.clone();
            }
        }
        _ => {}
    }
    w
}

/// The application: edits at random moments of the fault phase, each a whole body as a PUT
/// sends it, changing one or two things.
pub(super) async fn application(world: Arc<World>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xa991);
    let edits = rng.random_range(0..12);
    let mut at: Vec<(u64, Option<usize>)> = (0..edits)
        .map(|_| (rng.random_range(0..CHAOS.as_secs()), None))
        .collect();
    // Some edits land just after a reminder goes stale, while the scheduler or a consumer
    // may be expiring it: the edit that makes it fresh again races the expiry.
    for (i, fresh) in world.fresh_at_start.iter().enumerate() {
        if rng.random_bool(0.25) {
            let t = fresh.since(super::world::EPOCH).as_secs() + rng.random_range(0..90);
            at.push((t, Some(i)));
        }
    }
    at.sort_unstable();
    let mut elapsed = 0;
    for (t, which) in at {
        tokio::time::sleep(Duration::from_secs(t.saturating_sub(elapsed))).await;
        elapsed = elapsed.max(t);
        let i = which.unwrap_or_else(|| rng.random_range(0..world.ids.len().max(1)));
        let Some(id) = world.ids.get(i) else {
            return;
        };
        let force = if which.is_some() {
            Force::Later
        } else {
            Force::Nothing
        };
        let _ = edit(&world, id, &mut rng, t, force).await;
    }
}

/// What an edit must change first, beside what it draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Force {
    Nothing,
    /// The due time later (so a stale reminder is fresh again).
    Later,
    /// The due time later, past the ledger's TTL horizon.
    PastHorizon,
    /// Freshness alone, to end at this time.
    FreshUntil(Timestamp),
}

/// A moment where the pipeline, mid-call, has the application act at once and waits for its
/// answer: the interleavings of issue 32's windows 1 and 2, which timing alone rarely lines
/// up.
#[derive(Debug, Clone)]
pub enum Prompt {
    /// The scheduler holds a due page with these reminders: one that is stale is edited
    /// fresh again before the scheduler goes on (window 1).
    Scanned(Vec<ReminderId>),
    /// A provider accepted a send of this reminder's delivery (whose worker then stops):
    /// the reminder is moved past the ledger's horizon (window 2).
    Accepted(ReminderId),
    /// A delivery died for a reason that falls back, naming no channel (the order's next is
    /// not listed): the application adds the order's channels the reminder lacks, and the
    /// operator redrives that channel's DLQ a few minutes later (window 6).
    DiedAlone(crate::delivery::state::Origin),
    /// A channel's breaker opened until this time: the application shortens the freshness
    /// of a reminder waiting on that channel to end a few seconds after it (window 5).
    BreakerOpened(Channel, Timestamp),
}

/// Where prompts go, each with the answer to send when the edit is done.
pub type Prompter = tokio::sync::mpsc::UnboundedSender<(Prompt, tokio::sync::oneshot::Sender<()>)>;
pub type Prompts = tokio::sync::mpsc::UnboundedReceiver<(Prompt, tokio::sync::oneshot::Sender<()>)>;

/// Have the application act on `what`, and wait until it has (at once when nobody listens).
pub async fn prompt(to: Option<&Prompter>, what: Prompt) {
    let Some(to) = to else { return };
    let (done, answered) = tokio::sync::oneshot::channel();
    if to.send((what, done)).is_ok() {
        let _ = answered.await;
    }
}

/// Have the application act on `what`, without waiting for it.
pub fn tell(to: Option<&Prompter>, what: Prompt) {
    if let Some(to) = to {
        let (done, _) = tokio::sync::oneshot::channel();
        let _ = to.send((what, done));
    }
}

/// The application answering prompts, for as long as the world runs.
pub(super) async fn prompted(world: Arc<World>, mut prompts: Prompts, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x9_70a1);
    while let Some((what, done)) = prompts.recv().await {
        let t = world.clock.now().since(super::world::EPOCH).as_secs();
        match what {
            Prompt::Scanned(ids) => {
                let now = world.clock.now();
                let mut stale = Vec::new();
                for id in ids {
                    use crate::ports::ReminderStore;
                    if let Ok(Some(r)) = world.store.get(&id).await {
                        if r.is_stale_at(now)
                            && r.status == crate::domain::ReminderStatus::Scheduled
                        {
                            stale.push(id);
                        }
                    }
                }
                if let Some(id) = stale.first().filter(|_| rng.random_bool(0.5)) {
                    if edit(&world, id, &mut rng, t, Force::Later).await {
                        world.counts.prompted_edits();
                    }
                }
            }
            Prompt::Accepted(id) => {
                if edit(&world, &id, &mut rng, t, Force::PastHorizon).await {
                    world.counts.prompted_edits();
                }
            }
            Prompt::DiedAlone(origin) => {
                if add_the_order(&world, &origin).await {
                    world.counts.prompted_edits();
                    let after = Duration::from_secs(rng.random_range(120..900));
                    let redrive = redrive_later(world.clone(), origin.channel, after, seed);
                    tokio::task::spawn_local(redrive);
                }
            }
            Prompt::BreakerOpened(channel, until) => {
                // Two at most: the first worker to poll after the cool-down probes.
                for _ in 0..2 {
                    let Some(id) = waiting_on(&world, channel, until, &mut rng).await else {
                        break;
                    };
                    let after = Duration::from_millis(rng.random_range(1_000..12_000));
                    let cut = Force::FreshUntil(until.plus(after));
                    if edit(&world, &id, &mut rng, t, cut).await {
                        world.counts.prompted_edits();
                    }
                }
            }
        }
        let _ = done.send(());
    }
}

/// A reminder, due by `until`, fresh well past it, whose delivery on `channel` has not
/// settled: one a breaker open until `until` holds.
async fn waiting_on(
    world: &World,
    channel: Channel,
    until: Timestamp,
    rng: &mut StdRng,
) -> Option<ReminderId> {
    use crate::ports::{Ledger, ReminderStore};
    let mut waiting = Vec::new();
    for id in &world.ids {
        let Ok(Some(r)) = world.store.get(id).await else {
            continue;
        };
        let pending = matches!(
            r.status,
            crate::domain::ReminderStatus::Scheduled | crate::domain::ReminderStatus::Enqueued
        );
        let fits = r.due_at <= until && r.fresh_until > until.plus(Duration::from_secs(30));
        if !pending || !fits || !r.recipients.contains_key(&channel) {
            continue;
        }
        let key = crate::domain::DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
        // Not settled, and not mid-send: a worker that read the old version before this edit
        // and sends later did nothing wrong.
        let busy = match world.ledger.get(&key).await {
            Ok(Some(rec)) => {
                rec.status().is_terminal()
                    || rec.status() == crate::delivery::state::Status::Sending
            }
            _ => false,
        };
        if !busy {
            waiting.push(r.reminder_id);
        }
    }
    (!waiting.is_empty()).then(|| waiting.swap_remove(rng.random_range(0..waiting.len())))
}

/// A PUT of the reminder's body with the channels of the subscriber's fallback order it does
/// not list added: whether the API acknowledged it.
async fn add_the_order(world: &World, origin: &crate::delivery::state::Origin) -> bool {
    use crate::ports::ReminderStore;
    let store = &world.store;
    let (Ok(Some(cur)), Ok(prefs)) = (
        store.get(&origin.reminder_id).await,
        store.preferences(&origin.subscriber_id).await,
    ) else {
        return false;
    };
    let mut prefs = prefs.unwrap_or_default();
    let lacks = |c: &Channel| !cur.recipients.contains_key(c);
    if !prefs.fallback.iter().any(lacks) {
        // No order that names a channel the reminder lacks: the subscriber sets one, the
        // dead channel first, then the missing ones, then the rest.
        let (missing, listed): (Vec<Channel>, Vec<Channel>) = Channel::ALL
            .into_iter()
            .filter(|c| *c != origin.channel)
            .partition(lacks);
        if missing.is_empty() {
            return false;
        }
        prefs.fallback = std::iter::once(origin.channel)
            .chain(missing)
            .chain(listed)
            .collect();
        if store
            .put_preferences(&origin.subscriber_id, &prefs)
            .await
            .is_err()
        {
            return false;
        }
        let now = world.clock.now();
        world
            .journal
            .preferences_written(&origin.subscriber_id, &prefs, now);
    }
    let ever: BTreeSet<Channel> = world
        .acks
        .landed_versions(&cur.reminder_id)
        .iter()
        .flat_map(|l| l.channels.iter().copied())
        .collect();
    let missing: Vec<Channel> = prefs
        .fallback
        .iter()
        .copied()
        .filter(|c| !cur.recipients.contains_key(c))
        .collect();
    if missing.is_empty() {
        return false;
    }
    let i = subscriber_index(&cur);
    let mut recipients: Vec<crate::domain::Recipient> = cur.recipients.values().cloned().collect();
    recipients.extend(missing.iter().map(|c| recipient(*c, i)));
    let k = Kinds {
        added: missing.iter().any(|c| !ever.contains(c)),
        readded: missing.iter().any(|c| ever.contains(c)),
        ..Kinds::default()
    };
    let changes = Edit {
        recipients: Some(recipients),
        ..Edit::default()
    };
    let ports = &world.ports;
    let now = world.clock.now();
    let call = outbox::edit(
        &ports.reminders,
        &ports.ledger,
        &cur.reminder_id,
        changes,
        now,
        world.retention,
    );
    match invoke(call, API_TIMEOUT).await {
        Some(Ok(Edited::Edited(next))) => {
            world.acks.acknowledged(&world.journal, &next, k);
            true
        }
        _ => false,
    }
}

/// An operator's redrive of `channel`'s DLQ, every reason, `after` from now.
async fn redrive_later(world: Arc<World>, channel: Channel, after: Duration, seed: u64) {
    tokio::time::sleep(after).await;
    let cfg = RedriveConfig {
        retention: world.retention,
        ..RedriveConfig::default()
    };
    let redriver = Redriver::new(world.ports.clone(), cfg, seed ^ 0x6_4ed4);
    let req = RedriveRequest {
        channel,
        reasons: DeadReason::ALL.into_iter().collect(),
        first_seen_after: None,
        first_seen_before: None,
        dead_after: None,
        dead_before: None,
        max_messages: 20,
        max_per_second: 10,
        dry_run: false,
        operator: "chaos".into(),
        note: "after a chain took over".into(),
        extend_freshness_secs: None,
        accept_duplicates: true,
    };
    let deadline = world.clock.now().plus(Duration::from_secs(60));
    let _ = invoke(redriver.run(&req, Some(deadline)), Duration::from_secs(90)).await;
}

/// One PUT of `id`'s whole body, changing one or two things (`force`: first moving it later,
/// fresh again).
/// The API's PUT of a drawn edit (or the one `force` names): whether it was accepted.
async fn edit(world: &World, id: &ReminderId, rng: &mut StdRng, t: u64, force: Force) -> bool {
    use crate::ports::ReminderStore;
    let Ok(Some(cur)) = world.store.get(id).await else {
        return false;
    };
    let now = world.clock.now();
    let mut k = Kinds {
        of_stale: cur.is_stale_at(now),
        ..Kinds::default()
    };
    let (mut due, mut fresh) = (cur.due_at, cur.fresh_until);
    let mut channels: BTreeSet<Channel> = cur.recipients.keys().copied().collect();
    let mut content = cur.content.clone();
    let ever: BTreeSet<Channel> = world
        .acks
        .landed_versions(id)
        .iter()
        .flat_map(|l| l.channels.iter().copied())
        .collect();
    if let Force::FreshUntil(end) = force {
        fresh = end.max(due);
        k.freshness = true;
    }
    let draws = if matches!(force, Force::FreshUntil(_)) {
        0
    } else {
        rng.random_range(1..3)
    };
    for n in 0..draws {
        let draw = if force != Force::Nothing && n == 0 {
            1
        } else {
            rng.random_range(0..7)
        };
        match draw {
            0 => {
                let back = Duration::from_secs(rng.random_range(60..1_800));
                due = due.minus(back).max(now.minus(Duration::from_secs(60)));
                k.due_earlier = true;
            }
            1 | 2 => {
                // Later, and sometimes past the ledger's TTL horizon (the retention of the
                // world is short, so a move of hours outruns a delivery's proof).
                let horizon = rng.random_bool(0.4) || (n == 0 && force == Force::PastHorizon);
                let secs = if horizon {
                    world.retention.0.as_secs() + rng.random_range(600..3_600)
                } else {
                    rng.random_range(300..3_600)
                };
                let later = Duration::from_secs(secs);
                fresh = fresh.plus(later);
                due = due.plus(later);
                k.past_horizon |= horizon;
                k.due_later |= !horizon;
            }
            3 => {
                fresh = due.plus(Duration::from_secs(rng.random_range(60..5_400)));
                k.freshness = true;
            }
            4 => {
                content = Content::Text {
                    subject: "Reminder".into(),
                    body: format!("edited at {t}"),
                };
                k.content = true;
            }
            5 if channels.len() > 1 => {
                let all: Vec<Channel> = channels.iter().copied().collect();
                channels.remove(&all[rng.random_range(0..all.len())]);
                k.removed = true;
            }
            _ => {
                let missing: Vec<Channel> = Channel::ALL
                    .into_iter()
                    .filter(|c| !channels.contains(c))
                    .collect();
                // Back first: a channel an earlier edit took away.
                let back: Vec<Channel> = missing
                    .iter()
                    .copied()
                    .filter(|c| ever.contains(c))
                    .collect();
                let pick = if back.is_empty() { &missing } else { &back };
                if let Some(c) = pick.get(rng.random_range(0..pick.len().max(1))) {
                    channels.insert(*c);
                    k.readded |= ever.contains(c);
                    k.added |= !ever.contains(c);
                }
            }
        }
    }
    let fresh = fresh.max(due);
    let i = subscriber_index(&cur);
    let changes = Edit {
        due_at: Some(due),
        fresh_until: Some(fresh),
        content: Some(content),
        recipients: Some(channels.iter().map(|c| recipient(*c, i)).collect()),
    };
    let ports = &world.ports;
    let call = outbox::edit(
        &ports.reminders,
        &ports.ledger,
        id,
        changes,
        now,
        world.retention,
    );
    let Some(Ok(Edited::Edited(next))) = invoke(call, API_TIMEOUT).await else {
        return false;
    };
    world.acks.acknowledged(&world.journal, &next, k);
    if matches!(force, Force::FreshUntil(_)) {
        lock(&world.counts.cut).insert(id.clone());
    }
    true
}

/// The world's recipients are per subscriber (`s-0` … `s-2`), so a dead address is shared by
/// every reminder of its subscriber.
fn subscriber_index(r: &Reminder) -> u32 {
    r.subscriber_id
        .as_str()
        .trim_start_matches("s-")
        .parse()
        .unwrap_or(0)
}

/// An operator redriving a channel's DLQ now and then, during the faults: any reasons, and
/// sometimes a cancel of a reminder at the same moment.
pub(super) async fn redrives(world: Arc<World>, seed: u64) {
    let cfg = RedriveConfig {
        retention: world.retention,
        ..RedriveConfig::default()
    };
    let redriver = Redriver::new(world.ports.clone(), cfg, seed);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x4ed4);
    while !world.dice.is_calm() {
        tokio::time::sleep(Duration::from_secs(rng.random_range(300..1_200))).await;
        let channel = Channel::ALL[rng.random_range(0..3)];
        let reasons: BTreeSet<DeadReason> = DeadReason::ALL
            .into_iter()
            .filter(|_| rng.random_bool(0.6))
            .collect();
        let accept_duplicates = reasons.contains(&DeadReason::Ambiguous);
        let req = RedriveRequest {
            channel,
            reasons,
            first_seen_after: None,
            first_seen_before: None,
            dead_after: None,
            dead_before: None,
            max_messages: 20,
            max_per_second: 10,
            dry_run: false,
            operator: "chaos".into(),
            note: String::new(),
            extend_freshness_secs: rng.random_bool(0.3).then_some(900),
            accept_duplicates,
        };
        let deadline = world.clock.now().plus(Duration::from_secs(60));
        let run = invoke(redriver.run(&req, Some(deadline)), Duration::from_secs(90));
        let racing = rng
            .random_bool(0.3)
            .then(|| rng.random_range(0..world.ids.len().max(1)));
        match racing.and_then(|i| world.ids.get(i)) {
            Some(id) => {
                world.counts.racing_cancels();
                let _ = tokio::join!(run, cancel(&world, id));
            }
            None => {
                let _ = run.await;
            }
        }
    }
}

/// Cancels and invalid items at random moments of the fault phase.
pub(super) async fn operator(world: Arc<World>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x0e7a);
    let mut at: Vec<u64> = (0..world.shape.ops)
        .map(|_| rng.random_range(0..CHAOS.as_secs()))
        .collect();
    at.sort_unstable();
    let mut elapsed = 0;
    for t in at {
        tokio::time::sleep(Duration::from_secs(t - elapsed)).await;
        elapsed = t;
        let Some(id) = world.ids.get(rng.random_range(0..world.ids.len().max(1))) else {
            return;
        };
        if rng.random_bool(0.7) {
            cancel(&world, id).await;
        } else {
            // An invalid item written mid-run, as another application might: never due
            // (fresh until before its due time). The scheduler must quarantine it.
            super::world::invalid_item(&world, t).await;
        }
    }
}

/// The API's DELETE: asked (whatever comes of it), and what its answer settled told the
/// journal.
async fn cancel(world: &World, id: &ReminderId) {
    lock(&world.cancel_requests).insert(id.clone());
    let now = world.clock.now();
    let ports = &world.ports;
    let call = outbox::cancel(&ports.reminders, &ports.ledger, id, now, world.retention);
    if let Some(answer) = invoke(call, API_TIMEOUT).await {
        super::world::heard(world, id, answer).await;
    }
}

/// Counts of what the world's operators did that the journal does not see.
#[derive(Default)]
pub struct Counts {
    racing: std::sync::atomic::AtomicU64,
    prompted: std::sync::atomic::AtomicU64,
    /// Reminders whose freshness a breaker's opening cut short (window 5).
    cut: Mutex<BTreeSet<ReminderId>>,
}

impl Counts {
    fn prompted_edits(&self) {
        self.prompted
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Edits made at a window's moment ([`Prompt`]).
    pub fn prompted(&self) -> u64 {
        self.prompted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether a breaker's opening cut this reminder's freshness short (an accepted edit).
    pub fn cut_short(&self, id: &ReminderId) -> bool {
        lock(&self.cut).contains(id)
    }

    fn racing_cancels(&self) {
        self.racing
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn racing(&self) -> u64 {
        self.racing.load(std::sync::atomic::Ordering::SeqCst)
    }
}
