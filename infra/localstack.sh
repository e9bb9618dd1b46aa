#!/usr/bin/env bash
# The emulator tests and the README walk-through against a LocalStack you run yourself (it
# needs Docker). CI runs the same tests against moto (infra/test.sh), never LocalStack: the CI
# machines have no Docker, so nothing here is checked by CI.
#
#   localstack start -d
#   infra/localstack.sh                     # AWS_ENDPOINT_URL defaults to http://localhost:4566
#
# What the project relies on LocalStack to serve (the same as moto in CI):
#   DynamoDB   tables with a GSI (INCLUDE projection), TTL, conditional PutItem/UpdateItem with
#              ReturnValuesOnConditionCheckFailure, Query with ExclusiveStartKey, Scan of an index
#   SQS        standard queues with a redrive policy, SendMessageBatch with DelaySeconds and
#              message attributes, ReceiveMessage with system attributes, ChangeMessageVisibility,
#              DeleteMessage, GetQueueAttributes
#   SES v2     SendEmail (verified identities)       SNS      Publish, CreatePlatformEndpoint
#   Secrets Manager  GetSecretValue                  CloudFormation  CreateStack, DescribeStacks
#
# Left out: the tests that need an emulator to accept what real DynamoDB refuses (a text value
# for the index's number sort key, `window_7_*` and the poison rows written that way): LocalStack
# refuses those writes, as AWS does, so there is nothing for them to test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION="${AWS_REGION:-us-east-1}"
unset AWS_PROFILE AWS_SESSION_TOKEN

if ! curl -sf "$AWS_ENDPOINT_URL/_localstack/health" >/dev/null; then
  echo "no LocalStack answers at $AWS_ENDPOINT_URL (localstack start -d)" >&2
  exit 1
fi

export CARGO_INCREMENTAL=0
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast -E 'not test(/window_7/)'
else
  cargo test --workspace --locked --no-fail-fast -- --skip window_7
fi
