//! When an idle run ends: nothing due within the horizon, every queue empty of what this run
//! can take, twice in a row.

use super::*;

/// Decides when the run ends: the time limit, an interrupt, or (for [`Stop::Idle`]) nothing
/// due within the horizon and every queue empty, twice in a row.
pub(super) async fn watch<P: Ports>(
    consumer: &Consumer<P>,
    cfg: &LocalConfig,
    stop: Stop,
    limit: Timestamp,
    interrupt: &std::sync::atomic::AtomicBool,
    shared: &Shared,
    on_progress: Option<&(dyn Fn(&Progress) + Sync)>,
) -> Result<(), PortError> {
    let clock = consumer.ports().clock();
    let mut quiet = 0;
    while !shared.stopped() {
        if let Some(show) = on_progress {
            let mut depths = PerChannel::<Option<QueueDepth>>::default();
            for c in Channel::ALL {
                *depths.get_mut(c) = consumer.ports().queue().depth(c).await.ok();
            }
            let report = shared.report().clone();
            show(&Progress { report, depths });
        }
        let now = clock.now();
        if now >= limit || interrupt.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        if let Stop::Idle { .. } = stop {
            let horizon = now.plus(cfg.idle_horizon);
            match idle_until(consumer.ports(), now, horizon, shared).await {
                Ok(Some(next_due)) => {
                    quiet += 1;
                    if quiet >= 2 {
                        let mut r = shared.report();
                        r.idle = true;
                        r.next_due = next_due;
                        break;
                    }
                }
                Ok(None) => quiet = 0,
                Err(e) => tracing::warn!(error = %e, "idle check failed; retrying"),
            }
        }
        clock
            .sleep(cfg.poll_interval.max(Duration::from_millis(200)))
            .await;
    }
    shared.halt();
    Ok(())
}

/// `Some(next due)` when every queue is empty and nothing is due before `horizon` (the next
/// due time after it, if any); `None` while there is work.
pub(super) async fn idle_until<P: Ports>(
    ports: &P,
    now: Timestamp,
    horizon: Timestamp,
    shared: &Shared,
) -> Result<Option<Option<Timestamp>>, PortError> {
    for channel in Channel::ALL {
        let depth = ports.queue().depth(channel).await?;
        // A batch at work, a message of this run's back within the horizon, or (in the first
        // horizon of the run) one in flight since before it.
        let busy = shared.busy(channel, depth.in_flight, now, horizon);
        if depth.visible > 0 || depth.delayed > 0 || busy {
            return Ok(None);
        }
    }
    let next = next_due(ports).await?;
    Ok(match next {
        Some(at) if at <= horizon => None,
        next => Some(next),
    })
}

/// Each channel's messages in flight (0 where the depth cannot be read).
pub(super) async fn in_flight<P: Ports>(ports: &P) -> PerChannel<u64> {
    let mut out = PerChannel::<u64>::default();
    for c in Channel::ALL {
        *out.get_mut(c) = ports.queue().depth(c).await.map_or(0, |d| d.in_flight);
    }
    out
}

/// The earliest due time in the due index, if any reminder is scheduled.
pub async fn next_due<P: Ports>(ports: &P) -> Result<Option<Timestamp>, PortError> {
    let far = Timestamp::from_millis(i64::MAX / 2);
    let store = ports.reminders();
    let skip = std::collections::BTreeSet::new();
    let mut next: Option<Timestamp> = None;
    for shard in 0..store.shards() {
        let q = reminders_core::ports::DueQuery {
            shard,
            until: far,
            limit: 1,
            after: None,
            skip: &skip,
        };
        for entry in store.query_due(&q).await?.items {
            let at = entry.order().0;
            next = Some(next.map_or(at, |n: Timestamp| n.min(at)));
        }
    }
    Ok(next)
}

/// Nothing left anywhere: no scheduled reminder in any shard, no message in any queue.
pub async fn nothing_pending<P: Ports>(ports: &P) -> Result<bool, PortError> {
    Ok(queues_empty(ports).await? && next_due(ports).await?.is_none())
}

/// No message in any channel's queue (visible, in flight or delayed).
pub(super) async fn queues_empty<P: Ports>(ports: &P) -> Result<bool, PortError> {
    for channel in Channel::ALL {
        if ports.queue().depth(channel).await?.total() > 0 {
            return Ok(false);
        }
    }
    Ok(true)
}
