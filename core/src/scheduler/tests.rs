use std::time::Duration;

use super::*;

#[test]
fn delay_seconds_land_on_the_due_time_never_before() {
    let now = Timestamp::from_millis(1_000_000);
    assert_eq!(delay_secs(now, now), 0);
    assert_eq!(
        delay_secs(Timestamp::from_millis(999_000), now),
        0,
        "already due"
    );
    assert_eq!(delay_secs(now.plus(Duration::from_millis(45_001)), now), 46);
    assert_eq!(delay_secs(now.plus(Duration::from_secs(90)), now), 90);
    assert_eq!(delay_secs(now.plus(Duration::from_secs(2_000)), now), 900);
}
