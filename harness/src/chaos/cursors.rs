//! List cursors that reveal nothing (`cursor_leak`). Once a world has run, two applications
//! share one of its table's subscribers: `app-a` writes one to three series and as many one-off
//! reminders, `app-b` one or two of each (in one world in fifty, `app-a` more than a page reads),
//! weeks ahead (written at the end, so that nothing of them is pending while
//! the world runs). Then each application and a third that wrote nothing list that subscriber's
//! series and reminders a page of one at a time, through [`reminders_core::listing`] (what the API's
//! list routes answer). A page must hold only what its caller reaches, and its cursor must
//! reveal no item the caller may not read (decoded as anyone can: base64, as deep as it goes),
//! open for no other caller or list, and be refused once altered.

use base64::Engine;
use reminders_core::clock::Timestamp;
use reminders_core::domain::series::{NewSeries, Series};
use reminders_core::domain::{
    Access, Channel, Content, CursorSeal, NewReminder, Owner, ReminderId, SeriesId, SubscriberId,
    SuppressionKey,
};
use reminders_core::listing::{self, CursorSealing, List, ListError};
use std::time::Duration;

use super::world::World;
use super::{Plant, SeedReport};

const SHARED: &str = "s-shared";
const WEEKS_AHEAD: Duration = Duration::from_secs(30 * 24 * 3600);
/// The pages a judge follows of one list (each holds one item).
const MAX_PAGES: usize = 12;

fn owner(name: &str) -> Owner {
    Owner::parse(name).unwrap_or_else(|_| unreachable!("a short printable owner"))
}

/// The shared subscriber's series and reminders, each as its application's, written to the
/// table directly (not through the world's faults: they are what the lists are judged on, not a
/// part of the world's story). How many each application writes is drawn from the seed; in one
/// world in fifty `app-a` also writes more reminders than a page reads before it answers
/// ([`reminders_core::ports::reminders::MAX_SCANNED`]), all due before `app-b`'s, so that `app-b`'s
/// first page ends on one of `app-a`'s.
async fn share_a_subscriber(world: &World) {
    use rand::RngExt;
    use reminders_core::clock::Clock;
    let mut rng = world.seed.rng(super::seed::Stream::Cursors);
    let now = world.clock.now();
    let start = Timestamp::from_millis(
        (now.as_millis() + WEEKS_AHEAD.as_millis() as i64).div_euclid(60_000) * 60_000,
    );
    let many = if world.seed.0 % 50 == 7 {
        reminders_core::ports::reminders::MAX_SCANNED + 1
    } else {
        0
    };
    let plan = [
        (
            "app-a",
            rng.random_range(1..=3usize),
            rng.random_range(1..=3usize) + many,
        ),
        (
            "app-b",
            rng.random_range(1..=2usize),
            rng.random_range(1..=2usize),
        ),
    ];
    let mut n = 0u32;
    for (app, series, reminders) in plan {
        let access = Access::Owner(owner(app));
        for k in 0..series {
            n += 1;
            let new = NewSeries {
                series_id: SeriesId::parse(format!("shared-series-{app}-{k}")).unwrap(),
                subscriber_id: SubscriberId::parse(SHARED).unwrap(),
                rule: "FREQ=DAILY;BYHOUR=9;BYMINUTE=0".into(),
                zone: "UTC".into(),
                starts_at: start,
                until: None,
                fresh_for: Some(Duration::from_secs(600)),
                content: Content::Text {
                    subject: "Shared".into(),
                    body: app.into(),
                },
                recipients: vec![super::world::recipient(Channel::Email, 90 + n)],
            };
            let s = Series::new(new, Duration::from_secs(600)).expect("a valid series");
            let put = reminders_core::series::put(
                &*world.store,
                &*world.ledger,
                &access,
                s,
                now,
                world.retention,
            )
            .await;
            assert!(
                matches!(put, Ok(Ok(_))),
                "the shared subscriber's series: {put:?}"
            );
        }
        for k in 0..reminders {
            n += 1;
            let new = NewReminder {
                reminder_id: ReminderId::parse(format!("shared-reminder-{app}-{k}")).unwrap(),
                subscriber_id: SubscriberId::parse(SHARED).unwrap(),
                due_at: start.plus(Duration::from_secs(60 * u64::from(n))),
                fresh_until: None,
                content: Content::Text {
                    subject: "Shared".into(),
                    body: app.into(),
                },
                recipients: vec![super::world::recipient(Channel::Email, 90 + n % 10)],
            };
            let made = reminders_core::reminder_writes::create_owned(
                world.store.as_ref(),
                new,
                access.owner().cloned(),
                Duration::from_secs(3600),
                world.retention,
                now,
            )
            .await;
            assert!(
                matches!(made, Ok(Some(_))),
                "the shared subscriber's reminder: {made:?}"
            );
        }
    }
}

/// [`Plant::PlainCursor`]: the cursor handed out as the store's position, unsealed (what the
/// lists answered before their cursors were sealed).
struct Unsealed;

impl CursorSealing for Unsealed {
    fn seal(&self, _context: &str, plain: &str) -> String {
        plain.to_owned()
    }

    fn open(&self, _context: &str, token: &str) -> Option<String> {
        Some(token.to_owned())
    }
}

/// Every id of `subscriber`'s items and whose each is.
struct Items {
    ids: Vec<(String, Option<Owner>)>,
}

impl Items {
    async fn of(world: &World, subscriber: &SubscriberId) -> Self {
        use reminders_core::ports::series::SeriesStore;
        use reminders_core::ports::{Listed, SubscriberIndex};
        let mut ids = Vec::new();
        let mut after: Option<SeriesId> = None;
        while let Ok(page) = world.store.series_of(subscriber, after.as_ref(), 100).await {
            for s in page.items {
                ids.push((s.series_id.as_str().to_owned(), s.owner));
            }
            let Some(next) = page.next else { break };
            after = Some(next);
        }
        let mut from = None;
        while let Ok(page) = world
            .store
            .by_subscriber(subscriber, from.as_ref(), 100)
            .await
        {
            for item in page.items {
                match item {
                    Listed::Summary(s) => ids.push((s.reminder_id.as_str().to_owned(), s.owner)),
                    Listed::Unreadable { reminder_id, .. } => ids.push((reminder_id, None)),
                }
            }
            let Some(next) = page.next else { break };
            from = Some(next);
        }
        Self { ids }
    }

    /// The ids `access` may not read that `token`'s bytes hold, decoded as deep as base64 goes.
    fn revealed(&self, access: &Access, subscriber: &SubscriberId, token: &str) -> Vec<String> {
        let mut layers = vec![token.as_bytes().to_vec()];
        for _ in 0..3 {
            let last = layers.last().expect("one layer at least");
            let text = String::from_utf8_lossy(last).into_owned();
            let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(text.trim())
                .or_else(|_| base64::engine::general_purpose::STANDARD.decode(text.trim()));
            match decoded {
                Ok(bytes) => layers.push(bytes),
                Err(_) => break,
            }
        }
        self.ids
            .iter()
            .filter(|(_, o)| !access.reaches(o.as_ref(), subscriber))
            .filter(|(id, _)| {
                layers
                    .iter()
                    .any(|l| l.windows(id.len()).any(|w| w == id.as_bytes()))
            })
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// One character of `token` changed, in its middle (a base64url character for another).
fn altered(token: &str) -> String {
    let mut chars: Vec<char> = token.chars().collect();
    let mid = chars.len() / 2;
    if let Some(c) = chars.get_mut(mid) {
        *c = if *c == 'A' { 'B' } else { 'A' };
    }
    chars.into_iter().collect()
}

async fn page<K: CursorSealing + ?Sized>(
    world: &World,
    seal: &K,
    list: List,
    access: &Access,
    subscriber: &SubscriberId,
    cursor: Option<&str>,
) -> Result<(Vec<Option<Owner>>, Option<String>), ListError> {
    match list {
        List::Series => {
            let p =
                listing::series_page(&*world.store, seal, access, subscriber, cursor, 1).await?;
            Ok((
                p.items.into_iter().map(|s| s.owner).collect(),
                p.next_cursor,
            ))
        }
        List::Reminders => {
            let p =
                listing::reminders_page(&*world.store, seal, access, subscriber, cursor, 1).await?;
            let owners = p
                .items
                .iter()
                .map(|i| match i {
                    reminders_core::ports::Listed::Summary(s) => s.owner.clone(),
                    reminders_core::ports::Listed::Unreadable { .. } => None,
                })
                .collect();
            Ok((owners, p.next_cursor))
        }
    }
}

/// `cursor_leak`: every list of the shared subscriber, as each application and as one that wrote
/// nothing.
pub(super) async fn judge(world: &World, report: &mut SeedReport) {
    let key = SuppressionKey::new(b"chaos-suppression-key".to_vec())
        .unwrap_or_else(|_| unreachable!("a key of 21 bytes"));
    let sealed = CursorSeal::from_key(&key);
    let seal: &dyn CursorSealing = if world.plant == Some(Plant::PlainCursor) {
        &Unsealed
    } else {
        &sealed
    };
    // The world's own items have no owner: an application's list of their subscribers is empty
    // and hands out no cursor, so the shared subscriber's lists are the ones to judge.
    share_a_subscriber(world).await;
    let subscribers = [SubscriberId::parse(SHARED).unwrap()];
    let callers = ["app-a", "app-b", "app-c"].map(|a| Access::Owner(owner(a)));
    for subscriber in &subscribers {
        let items = Items::of(world, subscriber).await;
        for list in [List::Series, List::Reminders] {
            for access in &callers {
                let who = access.owner().map_or("", |o| o.as_str());
                let mut cursor: Option<String> = None;
                for _ in 0..MAX_PAGES {
                    let Ok((owners, next)) =
                        page(world, seal, list, access, subscriber, cursor.as_deref()).await
                    else {
                        let what = format!(
                            "{who}'s {} list of {subscriber}: a cursor it was handed was refused",
                            list.as_str()
                        );
                        report.broken(|t| &mut t.cursor_leak, what);
                        break;
                    };
                    if owners
                        .iter()
                        .any(|o| !access.reaches(o.as_ref(), subscriber))
                    {
                        let what = format!(
                            "{who}'s {} list of {subscriber}: a page shows another owner's item",
                            list.as_str()
                        );
                        report.broken(|t| &mut t.cursor_leak, what);
                    }
                    let Some(token) = next else { break };
                    report.tally.cursors_judged += 1;
                    for id in items.revealed(access, subscriber, &token) {
                        let what = format!("{who}'s {} list of {subscriber}: its cursor {token} reveals {id}, which {who} may not read", list.as_str());
                        report.broken(|t| &mut t.cursor_leak, what);
                    }
                    let elsewhere = [
                        (list, Access::Owner(owner("app-z"))),
                        (other(list), access.clone()),
                    ];
                    for (l, a) in elsewhere {
                        if page(world, seal, l, &a, subscriber, Some(&token))
                            .await
                            .is_ok()
                        {
                            let what = format!("{who}'s {} list of {subscriber}: its cursor opens the {} list for {}", list.as_str(), l.as_str(), a.owner().map_or("", |o| o.as_str()));
                            report.broken(|t| &mut t.cursor_leak, what);
                        }
                    }
                    let changed = altered(&token);
                    if changed != token
                        && page(world, seal, list, access, subscriber, Some(&changed))
                            .await
                            .is_ok()
                    {
                        let what = format!("{who}'s {} list of {subscriber}: its cursor, altered ({changed}), was accepted", list.as_str());
                        report.broken(|t| &mut t.cursor_leak, what);
                    }
                    cursor = Some(token);
                }
            }
        }
    }
}

fn other(list: List) -> List {
    match list {
        List::Series => List::Reminders,
        List::Reminders => List::Series,
    }
}
