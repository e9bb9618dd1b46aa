//! The AWS limits the planner models, each with the documentation it comes from (read on
//! 2026-12-05). One file, so a figure AWS changes is changed in one place; the models that
//! use them are [`super::capacity`] (DynamoDB, the SDK's retries, Lambda's concurrency) and
//! the consumer's mapping in [`super`].

/// DynamoDB.
pub mod dynamo {
    /// "Each partition on the table can serve up to 3,000 read request units or 1,000 write
    /// request units, or a linear combination of both."
    /// <https://repost.aws/knowledge-center/on-demand-table-throttling-dynamodb>; also
    /// "each individual partition is limited to 1,000 write units per second and 3,000 read
    /// units per second",
    /// <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html>.
    /// All items of one partition key value live in one partition, so a key (a due-index
    /// shard) can take no more.
    pub const PARTITION_WRITES_PER_SEC: f64 = 1_000.0;
    pub const PARTITION_READS_PER_SEC: f64 = 3_000.0;

    /// "New on-demand tables will be able to sustain up to 4,000 writes per second and
    /// 12,000 reads per second. ... throttling can still occur if the throughput exceeds
    /// twice the previous peak within the same 30 minutes."
    /// <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/pre-warming-on-demand-capacity-mode.html>;
    /// "you can immediately drive up to 4,000 write request units or 12,000 read request
    /// units, or a linear combination of both" (the knowledge-center page above). A global
    /// secondary index has throughput of its own, on the same terms.
    pub const ON_DEMAND_START_WRITES_PER_SEC: f64 = 4_000.0;
    pub const ON_DEMAND_START_READS_PER_SEC: f64 = 12_000.0;
    /// On demand takes twice the previous peak at once; a new peak counts after this long.
    pub const ON_DEMAND_PEAK_WINDOW_SECS: i64 = 30 * 60;

    /// The default per-table quota: "the 40,000 table-level read and write throughput limit"
    /// (the on-demand page's note,
    /// <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode.html>,
    /// and Service Quotas "Throughput default quotas"). Provisioned capacity is capped here.
    pub const TABLE_QUOTA_UNITS_PER_SEC: f64 = 40_000.0;

    /// A write unit is one write of up to 1 KB; a read unit one strongly consistent read of up
    /// to 4 KB, or two eventually consistent ones (the on-demand page, "Read request units and
    /// write request units"). The reminder, a ledger record and an index entry are each under
    /// 1 KB (the formats in docs/data-formats.md), so each write is one unit and each item read
    /// one.
    pub const READ_UNIT_BYTES: f64 = 4_096.0;
    /// The due index projects the keys and six small attributes (template.yaml, `due-index`):
    /// about this many bytes an entry (an estimate from the item format, not a measurement).
    pub const DUE_INDEX_ENTRY_BYTES: f64 = 200.0;
}

/// The AWS SDK for Rust's retries, as the functions use it (they set no retry configuration,
/// so every client runs the default).
pub mod sdk {
    /// "By default, a call will be tried three times (the initial attempt, plus two retries).
    /// ... each retry will be delayed by a short, random duration"
    /// <https://docs.aws.amazon.com/sdk-for-rust/latest/dg/retries.html>; `RetryConfig::standard()`:
    /// "max attempts of three", exponential backoff with jitter, "the default duration of
    /// 1 second" for `initial_backoff`: "the first retry will occur after 0 to 1 seconds, the
    /// second retry will occur after 0 to 2 seconds"
    /// (<https://docs.rs/aws-smithy-types/latest/aws_smithy_types/retry/struct.RetryConfig.html>),
    /// capped at `max_backoff` (20 s).
    pub const MAX_ATTEMPTS: u32 = 3;
    pub const INITIAL_BACKOFF_MS: f64 = 1_000.0;
    pub const MAX_BACKOFF_MS: f64 = 20_000.0;
}

/// AWS Lambda.
pub mod lambda {
    /// Concurrent executions per Region, default quota 1,000 ("Lambda quotas",
    /// <https://docs.aws.amazon.com/lambda/latest/dg/limits.html>); an account may reserve all
    /// but 100 of them ("as long as you leave at least 100 simultaneous executions unreserved",
    /// PutFunctionConcurrency,
    /// <https://docs.aws.amazon.com/goto/WebAPI/lambda/PutFunctionConcurrency>).
    pub const ACCOUNT_CONCURRENCY: u32 = 1_000;
    pub const UNRESERVED_MIN: u32 = 100;

    /// An SQS event source mapping on a standard queue: "When messages are available, Lambda
    /// starts processing five batches at a time with five concurrent invocations of your
    /// function. If messages are still available, Lambda increases the number of processes
    /// that are reading batches by up to 300 more instances per minute. The maximum number of
    /// batches that an event source mapping can process simultaneously is 1,000."
    /// <https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html>
    pub const ESM_START_BATCHES: u32 = 5;
    pub const ESM_SCALE_PER_MIN: u32 = 300;
    pub const ESM_MAX_BATCHES: u32 = 1_000;
    /// `ScalingConfig.MaximumConcurrency`: minimum 2, maximum 1,000
    /// (<https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-lambda-eventsourcemapping-scalingconfig.html>).
    pub const ESM_MAX_CONCURRENCY_RANGE: (u32, u32) = (2, 1_000);
    /// (The scaling page's newer text reads "up to 300 more concurrent invokes per minute. The
    /// maximum number of invokes that an event source mapping can process simultaneously is
    /// 1,250"; the template always sets `ScalingConfig.MaximumConcurrency`, at most 1,000, so
    /// the deployed mapping's ceiling is 1,000 either way.)
    ///
    /// Provisioned mode (`ProvisionedPollerConfig`, template.yaml's `ConsumerMinPollers` and
    /// `ConsumerMaxPollers`): "Configures the minimum (2-200) and maximum (2-2000) number of
    /// dedicated event pollers for the SQS event source mapping. Each poller can handle up to
    /// 1 MB/sec of throughput and 10 concurrent invokes."
    /// (<https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-parameters.html>, the
    /// `ProvisionedPollerConfig` row); "For Amazon SQS events source mappings, [MinimumPollers]
    /// default is 2, and minimum 2 required"; MaximumPollers "default is 200"
    /// (<https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-lambda-eventsourcemapping-provisionedpollerconfig.html>,
    /// whose schema caps it at 2,000; the API reference's newer text allows SQS 10,000,
    /// <https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html>).
    /// Provisioned mode and `ScalingConfig.MaximumConcurrency` are "mutually exclusive
    /// options" (the scaling page above): with it, the pollers bound the concurrency.
    pub const ESM_POLLER_CONCURRENCY: u32 = 10;
    pub const ESM_MIN_POLLERS_RANGE: (u32, u32) = (2, 200);
    pub const ESM_MAX_POLLERS_RANGE: (u32, u32) = (2, 2_000);
    /// "These event pollers can auto scale up to 1000 per concurrent executions per minute,
    /// more than three times faster than before ... and provide up to 20,000 concurrency"
    /// (AWS News Blog, "AWS Lambda enhances event processing with provisioned mode for SQS
    /// event-source mapping",
    /// <https://aws.amazon.com/blogs/aws/aws-lambda-enhances-sqs-processing-with-new-provisioned-mode-3x-faster-scaling-16x-higher-capacity>;
    /// the scaling page: "3 times faster scaling and up to 16 times higher processing
    /// capacity"). Modelled: a provisioned mapping starts at its minimum pollers' concurrency
    /// (they are kept ready), adds 1,000 concurrent invocations a minute while messages wait,
    /// up to its maximum pollers' concurrency and never above 20,000.
    pub const ESM_PROVISIONED_SCALE_PER_MIN: u32 = 1_000;
    pub const ESM_PROVISIONED_MAX_CONCURRENCY: u32 = 20_000;
    /// The most records a batch takes without a batching window: "When you set BatchSize to
    /// a value greater than 10, you must set MaximumBatchingWindowInSeconds to at least 1"
    /// (CreateEventSourceMapping, <https://docs.aws.amazon.com/lambda/latest/api/API_CreateEventSourceMapping.html>).
    /// The search takes it: the fewest invocations a record, with no window's wait added.
    pub const ESM_BATCH_WITHOUT_WINDOW: u32 = 10;
    /// An invocation's own overhead beside its calls (the runtime's next/response round trip
    /// on a warm container): an estimate, small beside the calls.
    pub const INVOKE_OVERHEAD_MS: f64 = 5.0;
    /// SQS standard queues: "The number of messages that an Amazon SQS queue can store is
    /// unlimited" (standard queue quotas,
    /// <https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html>):
    /// the queue is modelled without a throughput limit; its backlog is the other stages'
    /// waiting. Not modelled: the same page's "approximately 120,000 in flight messages" a
    /// queue (received, not yet deleted), which a consumer holding many messages for a
    /// provider's 429s could reach.
    pub const SQS_STANDARD_UNLIMITED: bool = true;
}

/// The provider's latency per send when the plan is not told (an assumption, printed with the
/// answer: a push or mail API answers in tens of milliseconds).
pub const DEFAULT_PROVIDER_LATENCY_MS: f64 = 50.0;
