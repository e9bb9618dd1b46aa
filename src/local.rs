//! The local pipeline runner: plays EventBridge Scheduler (a scheduler run every period) and
//! each channel's event source mapping (receive up to the batch size, build the same
//! `SqsEvent`, call the same handler, delete what succeeded, leave batch item failures to their
//! visibility) — on an emulator, LocalStack, or in-memory ports.

use std::time::Duration;

use crate::clock::{Clock, Timestamp};
use crate::consumer::event::{arn_for_url, to_sqs_event};
use crate::consumer::{BatchOutcome, Consumer, Metrics};
use crate::domain::{Channel, PerChannel};
use crate::ports::{DeliveryQueue, PortError, Ports, ReminderStore};
use crate::scheduler::Scheduler;

#[derive(Debug, Clone)]
pub struct LocalConfig {
    pub schedule_period: Duration,
    pub batch_size: u32,
    /// The queues' visibility timeout (what the event source mapping receives with).
    pub visibility_secs: u32,
    /// The consumer function's timeout (its invocation deadline).
    pub function_timeout: Duration,
    /// The scheduler function's timeout.
    pub scheduler_timeout: Duration,
    /// Pause between polls when nothing happened.
    pub poll_interval: Duration,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            schedule_period: Duration::from_secs(60),
            batch_size: 10,
            visibility_secs: 180,
            function_timeout: Duration::from_secs(30),
            scheduler_timeout: Duration::from_secs(50),
            poll_interval: Duration::from_millis(500),
        }
    }
}

/// When to stop.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    /// Once nothing is pending: no reminder left to schedule, every queue empty.
    Idle {
        at_most: Duration,
    },
    For(Duration),
}

#[derive(Debug, Clone, Default)]
pub struct LocalReport {
    pub scheduler_runs: u32,
    pub enqueued: u32,
    pub batches: u32,
    pub metrics: PerChannel<Metrics>,
    pub idle: bool,
}

pub async fn run<P: Ports>(
    scheduler: &Scheduler<P>,
    consumer: &Consumer<P>,
    queue_urls: &PerChannel<String>,
    cfg: &LocalConfig,
    stop: Stop,
) -> Result<LocalReport, PortError> {
    let clock = consumer.ports().clock();
    let start = clock.now();
    let limit = match stop {
        Stop::Idle { at_most } | Stop::For(at_most) => start.plus(at_most),
    };
    let mut report = LocalReport::default();
    let mut next_run = start;
    while clock.now() < limit {
        let now = clock.now();
        let mut busy = false;
        if now >= next_run {
            let run = scheduler.run(Some(now.plus(cfg.scheduler_timeout))).await?;
            report.scheduler_runs += 1;
            report.enqueued += run.enqueued;
            busy |= run.picked > 0;
            next_run = now.plus(cfg.schedule_period);
        }
        for channel in Channel::ALL {
            busy |= poll_channel(consumer, queue_urls, cfg, channel, &mut report).await?;
        }
        if matches!(stop, Stop::Idle { .. }) && !busy && nothing_pending(consumer.ports()).await? {
            report.idle = true;
            return Ok(report);
        }
        if !busy {
            clock.sleep(cfg.poll_interval).await;
        }
    }
    Ok(report)
}

/// One poll of one channel's event source mapping. Returns whether there was a batch.
async fn poll_channel<P: Ports>(
    consumer: &Consumer<P>,
    queue_urls: &PerChannel<String>,
    cfg: &LocalConfig,
    channel: Channel,
    report: &mut LocalReport,
) -> Result<bool, PortError> {
    let deadline = consumer.ports().clock().now().plus(cfg.function_timeout);
    let polled = poll_once(
        consumer,
        queue_urls,
        channel,
        cfg.batch_size,
        cfg.visibility_secs,
        Some(deadline),
    )
    .await?;
    let Some(out) = polled else {
        return Ok(false);
    };
    report.batches += 1;
    for c in Channel::ALL {
        report.metrics.get_mut(c).merge(out.metrics.get(c).clone());
    }
    Ok(true)
}

/// What an event source mapping does once: receive up to `batch_size` messages, build the
/// same `SqsEvent`, call the handler, delete what succeeded (failures keep their visibility).
/// `None` when nothing was visible.
pub async fn poll_once<P: Ports>(
    consumer: &Consumer<P>,
    queue_urls: &PerChannel<String>,
    channel: Channel,
    batch_size: u32,
    visibility_secs: u32,
    deadline: Option<Timestamp>,
) -> Result<Option<BatchOutcome>, PortError> {
    let queue = consumer.ports().queue();
    let got = queue.receive(channel, batch_size, visibility_secs).await?;
    if got.is_empty() {
        return Ok(None);
    }
    let arn = arn_for_url(queue_urls.get(channel), "local");
    let out = consumer.handle(to_sqs_event(&arn, &got), deadline).await;
    for m in &got {
        let failed = out
            .response
            .batch_item_failures
            .iter()
            .any(|f| f.item_identifier == m.message_id);
        if !failed {
            queue.delete(channel, &m.receipt_handle).await?;
        }
    }
    Ok(Some(out))
}

/// Nothing left anywhere: no scheduled reminder in any shard, no message in any queue.
pub async fn nothing_pending<P: Ports>(ports: &P) -> Result<bool, PortError> {
    for channel in Channel::ALL {
        if ports.queue().depth(channel).await?.total() > 0 {
            return Ok(false);
        }
    }
    let far = Timestamp::from_millis(i64::MAX / 2);
    let store = ports.reminders();
    let skip = std::collections::BTreeSet::new();
    for shard in 0..store.shards() {
        let q = crate::ports::DueQuery {
            shard,
            until: far,
            limit: 1,
            after: None,
            skip: &skip,
        };
        if !store.query_due(&q).await?.items.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}
