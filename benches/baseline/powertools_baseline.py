#!/usr/bin/env python3
"""The baseline the consumer's CPU is compared with: what a team would assemble in Python, an
idempotent SQS consumer on AWS Lambda Powertools (BatchProcessor with partial batch responses,
`idempotent_function` on DynamoDB), handling the very SQS events the Rust consumer handled,
against the same emulator. Per record it makes the same AWS calls: one GetItem of the reminder,
and the idempotency layer's two conditional writes (in progress, completed). Like the Rust run,
it calls no provider.

usage: powertools_baseline.py EVENTS.json REMINDERS_TABLE
Prints one JSON line: records, cpu_us_per_record (process CPU around the handling only).
"""
import json
import sys
import time
import uuid

import boto3
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)


class Context:
    """The parts of a Lambda context Powertools reads."""

    function_name = "powertools-baseline"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:powertools-baseline"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self):
        return 600_000


def main():
    events_path, reminders_table = sys.argv[1], sys.argv[2]
    with open(events_path) as f:
        events = json.load(f)
    dynamodb = boto3.client("dynamodb")
    idem_table = f"bench-powertools-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=idem_table,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    persistence = DynamoDBPersistenceLayer(table_name=idem_table)
    config = IdempotencyConfig(event_key_jmespath="delivery_key")
    processor = BatchProcessor(event_type=EventType.SQS)

    @idempotent_function(data_keyword_argument="message", persistence_store=persistence, config=config)
    def deliver(message: dict) -> dict:
        item = dynamodb.get_item(
            TableName=reminders_table,
            Key={"reminder_id": {"S": message["reminder_id"]}},
            ConsistentRead=True,
        ).get("Item")
        if item is None:
            raise ValueError("no such reminder")
        return {"delivered": message["delivery_key"]}

    def record_handler(record: SQSRecord):
        return deliver(message=json.loads(record.body))

    context = Context()
    config.register_lambda_context(context)
    records = sum(len(e["Records"]) for e in events)
    failures = 0
    started = time.process_time()
    for event in events:
        out = process_partial_response(event=event, record_handler=record_handler,
                                       processor=processor, context=context)
        failures += len(out.get("batchItemFailures", []))
    used = time.process_time() - started
    print(json.dumps({
        "mode": "powertools_io",
        "records": records,
        "failures": failures,
        "cpu_us_per_record": used * 1e6 / max(records, 1),
    }))


if __name__ == "__main__":
    main()
