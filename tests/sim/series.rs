//! A series load: N subscribers' series of one rule, their occurrences made ahead by the
//! scheduler's maker as deployed, then sent as any reminder is. The planner counts each
//! occurrence in the window as a delivery owed, and shows the maker's per-run limit.

use reminders_harness::sim::plan::{plan, PlanInput};
use reminders_harness::sim::SeriesLoad;

fn load(count: u32, rule: &str) -> PlanInput {
    PlanInput {
        series: Some(SeriesLoad {
            count,
            rule: rule.into(),
            zone: "Europe/Paris".into(),
        }),
        ..PlanInput::deployed(0, 200.0)
    }
}

/// 09:00 and 18:30 in Paris for 600 subscribers over a day: 1,200 occurrences owed, each
/// delivered once, within the scheduler's precision of its time.
#[tokio::test]
async fn a_series_load_delivers_every_occurrence_of_the_day_once() {
    let p = plan(&load(600, "FREQ=DAILY;BYHOUR=9,18;BYMINUTE=0")).await;
    let s = &p.simulated;
    assert_eq!(s.reminders, 1_200, "two occurrences a day each");
    assert_eq!(s.delivered, 1_200, "{s}");
    assert_eq!((s.duplicates, s.pending, s.expired), (0, 0, 0), "{s}");
    assert!(s.lateness_ms.p99 <= 10_000, "{s}");
    assert_eq!(p.estimate.first_wave_secs, 1_200.0 / 200.0);
}

/// The maker takes at most 1,000 series a run (one a minute) and makes 15 minutes ahead:
/// 20,000 series due at the same minute cannot all be made before it. The last 5,000 are made
/// (and sent) up to five minutes late, none lost (an hour of freshness).
#[tokio::test]
async fn twenty_thousand_series_at_one_minute_outrun_the_maker_by_five_minutes() {
    let input = PlanInput {
        throughput_per_sec: 5_000.0,
        ..load(20_000, "FREQ=DAILY;BYHOUR=9;BYMINUTE=0")
    };
    let s = plan(&input).await.simulated;
    assert_eq!(s.reminders, 20_000);
    assert_eq!(
        (s.delivered, s.duplicates, s.pending),
        (20_000, 0, 0),
        "{s}"
    );
    let made_late = s.lateness_ms.p99;
    assert!(
        (180_000..=360_000).contains(&made_late),
        "p99 {made_late} ms: the last thousands are made minutes late"
    );
    assert!(
        s.lateness_ms.p50 <= 60_000,
        "three quarters made ahead: {s}"
    );
}
