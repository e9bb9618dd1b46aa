//! The consumer (docs/design.md, "Ledger", "Failures and retries" and "Admission control and
//! fairness"): one SQS batch in, a partial batch response out.
//!
//! Each record runs the pipeline of [`record`] — decode, load the reminder, check
//! cancellation, freshness and the provider gate, claim in the ledger, send with the delivery
//! key as idempotency key, record the outcome fenced by the lease, then ack, hold (visibility)
//! or re-enqueue. Records run concurrently under a bound that halves on throttling and grows by
//! one on success; each runs under `catch_unwind`, so a panic fails that record only; records
//! not started before the deadline margin are released (visibility 0) and reported failed.
//!
//! The trigger must enable `ReportBatchItemFailures`: without it, one failed record would
//! make SQS redeliver the whole batch.

pub mod config;
pub mod event;
pub mod metrics;
mod steps;

use std::panic::AssertUnwindSafe;
use std::sync::Mutex;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tracing::Instrument;

use crate::clock::{Clock, Timestamp};
use crate::domain::{Channel, PerChannel, SuppressionKey};
use crate::ports::secret::SuppressionKeySource;
use crate::ports::{DeliveryQueue, PortError, Ports};
pub use config::ConsumerConfig;
pub use event::Incoming;
pub use metrics::Metrics;
use steps::health::{next_limit, GateCache};
pub use steps::{NEWER_STATUS_WAIT, REWAKE_ENTRY};

/// What happened to one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Done with (delivered, final, dead-lettered): the event source mapping deletes it.
    Ack,
    /// Visibility set to come back in `secs`; reported as a batch item failure.
    Hold { secs: u32 },
    /// A fresh delayed copy carries the wait; this one is acked.
    Reenqueued,
    /// Failed (infrastructure error or panic): reported, visibility untouched.
    Retry,
    /// Not started before the deadline: visibility 0, reported.
    Released,
    /// Our lease was lost to another worker (a fenced write refused): reported, visibility
    /// untouched, never deleted. Our receipt handle may be an older one, and SQS does not
    /// promise what an older handle does: a delete or a visibility change with it might act on
    /// the message the new holder is working on. The holder's own handle decides.
    Leave,
}

impl Action {
    /// Whether the record goes into `batchItemFailures`.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Action::Hold { .. } | Action::Retry | Action::Released | Action::Leave
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordReport {
    pub message_id: String,
    pub action: Action,
}

/// A batch's answer, and what happened, for tests, the simulation and the local runner.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchOutcome {
    pub response: SqsBatchResponse,
    pub records: Vec<RecordReport>,
    pub metrics: PerChannel<Metrics>,
}

pub struct Consumer<P: Ports> {
    ports: P,
    cfg: ConsumerConfig,
    queue_urls: PerChannel<String>,
    rng: Mutex<StdRng>,
    /// The warm container's copy of the provider gates, shared by the records in flight.
    gates: GateCache,
    concurrency: Mutex<usize>,
    metrics_namespace: String,
    /// The key suppressed addresses are hashed with (docs/design.md, "Suppressions"): without one,
    /// suppressions are neither checked nor recorded.
    suppression_key: Option<SuppressionKeySource>,
}

impl<P: Ports> Consumer<P> {
    /// `seed` makes every random choice (lease tokens, jitter) reproducible.
    pub fn new(ports: P, cfg: ConsumerConfig, queue_urls: PerChannel<String>, seed: u64) -> Self {
        let concurrency = cfg.initial_concurrency;
        let gate_cache = cfg.gate_cache;
        Self {
            ports,
            cfg,
            queue_urls,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            gates: GateCache::new(gate_cache),
            concurrency: Mutex::new(concurrency),
            metrics_namespace: metrics::NAMESPACE.to_owned(),
            suppression_key: None,
        }
    }

    /// Check and record suppressions, hashing addresses with the key from `source`.
    pub fn with_suppression_key(mut self, source: Option<SuppressionKeySource>) -> Self {
        self.suppression_key = source;
        self
    }

    /// The suppression key, `None` when suppressions are off; a secret is read on first use.
    pub(crate) async fn suppression_key(&self) -> Result<Option<SuppressionKey>, PortError> {
        match &self.suppression_key {
            None => Ok(None),
            Some(source) => source.get().await.map(Some),
        }
    }

    /// The EMF namespace (`METRICS_NAMESPACE`, from the AWS wiring's settings).
    pub fn with_metrics_namespace(mut self, namespace: String) -> Self {
        self.metrics_namespace = namespace;
        self
    }

    pub fn ports(&self) -> &P {
        &self.ports
    }

    pub fn config(&self) -> &ConsumerConfig {
        &self.cfg
    }

    /// Process one batch. `deadline` is the invocation's (epoch ms), if it has one.
    pub async fn handle(&self, event: SqsEvent, deadline: Option<Timestamp>) -> BatchOutcome {
        let mut reports = Vec::with_capacity(event.records.len());
        let mut metrics = PerChannel::<Metrics>::default();
        let mut pending = Vec::new();
        for record in &event.records {
            match event::incoming(record, &self.queue_urls) {
                Ok(inc) => pending.push(inc),
                Err(e) => {
                    tracing::error!(error = %e, message_id = ?record.message_id, "record cannot be processed");
                    if let Some(id) = &record.message_id {
                        reports.push(RecordReport {
                            message_id: id.clone(),
                            action: Action::Retry,
                        });
                    }
                }
            }
        }
        let mut pending = pending.into_iter();
        let mut in_flight = FuturesUnordered::new();
        let mut limit = self.current_concurrency();
        loop {
            while in_flight.len() < limit {
                let Some(inc) = pending.next() else { break };
                if self.past_deadline(deadline) {
                    reports.push(self.release(inc, &mut metrics).await);
                    continue;
                }
                let seed = self.next_seed();
                in_flight.push(self.run_one(inc, StdRng::seed_from_u64(seed), deadline));
            }
            let Some((report, channel, m)) = in_flight.next().await else {
                break;
            };
            limit = next_limit(limit, &m, self.cfg.max_concurrency);
            metrics.get_mut(channel).merge(m);
            reports.push(report);
        }
        *lock(&self.concurrency) = limit;
        self.emit(&metrics);
        let failed = reports
            .iter()
            .filter(|r| r.action.is_failure())
            .map(|r| r.message_id.clone());
        BatchOutcome {
            response: event::batch_response(failed.collect::<Vec<_>>()),
            records: reports,
            metrics,
        }
    }

    async fn run_one(
        &self,
        inc: Incoming,
        mut rng: StdRng,
        deadline: Option<Timestamp>,
    ) -> (RecordReport, Channel, Metrics) {
        let mut m = Metrics::default();
        let span = tracing::info_span!(
            "record",
            message_id = %inc.message_id,
            channel = %inc.channel,
            receive_count = inc.receive_count,
            delivery_key = tracing::field::Empty,
            trace_header = inc.trace_header.as_deref(),
        );
        let outcome = AssertUnwindSafe(
            self.process(&inc, deadline, &mut rng, &mut m)
                .instrument(span.clone()),
        )
        .catch_unwind()
        .await;
        let action = match outcome {
            Ok(Ok(action)) => action,
            Ok(Err(e)) => {
                if e.is_invariant() {
                    m.invariant_errors += 1;
                } else {
                    m.infra_errors += 1;
                }
                span.in_scope(|| {
                    tracing::error!(error = %e, retryable = e.is_retryable(), "record failed; retried through its queue")
                });
                Action::Retry
            }
            Err(_) => {
                m.panics += 1;
                span.in_scope(|| tracing::error!("record panicked; retried through its queue"));
                Action::Retry
            }
        };
        let report = RecordReport {
            message_id: inc.message_id,
            action,
        };
        (report, inc.channel, m)
    }

    async fn release(&self, inc: Incoming, metrics: &mut PerChannel<Metrics>) -> RecordReport {
        metrics.get_mut(inc.channel).released += 1;
        let queue = self.ports.queue();
        if let Err(e) = queue
            .change_visibility(inc.channel, &inc.receipt_handle, 0)
            .await
        {
            tracing::warn!(error = %e, message_id = %inc.message_id, "release failed; the message returns after its visibility timeout");
        }
        RecordReport {
            message_id: inc.message_id,
            action: Action::Released,
        }
    }

    fn past_deadline(&self, deadline: Option<Timestamp>) -> bool {
        deadline.is_some_and(|d| self.ports.clock().now().plus(self.cfg.deadline_margin) >= d)
    }

    fn current_concurrency(&self) -> usize {
        (*lock(&self.concurrency)).clamp(1, self.cfg.max_concurrency)
    }

    fn next_seed(&self) -> u64 {
        lock(&self.rng).next_u64()
    }

    fn emit(&self, metrics: &PerChannel<Metrics>) {
        if !self.cfg.emit_metrics {
            return;
        }
        let now = self.ports.clock().now();
        for channel in Channel::ALL {
            let m = metrics.get(channel);
            if *m != Metrics::default() {
                // EMF must be a bare JSON line on stdout, not wrapped in a tracing event.
                println!("{}", m.emf(channel, now, &self.metrics_namespace));
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
