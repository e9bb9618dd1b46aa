#!/usr/bin/env bash
# The emulator suite's second leg: the suites whose calls reach the services LocalStack serves
# (nextest's `localstack` profile: the local path, the pipeline end to end, the events, the
# providers, the series, the CLI's API, operator, subscriber, walk-through and series tests),
# against LocalStack with DynamoDB on moto. infra/test.sh runs it beside the moto leg; it also
# runs on its own (from the project root):
#
#   infra/localstack.sh           # installs and starts what it needs, stops it on exit
#   infra/localstack.sh --install # only installs (infra/test.sh, while it builds)
#
# LocalStack 4.9.2 runs in host mode (no Docker) on Python 3.11, installed into
# .venv-localstack with the pins below (newer versions need Python 3.12; the others keep its
# TLS and CBOR stacks importable). It serves SQS, SNS, EventBridge, Scheduler and Secrets
# Manager. The services it cannot serve here go to moto through the SDK's per-service
# endpoints, so the binaries are the ones that run on AWS:
#   DynamoDB, DynamoDB Streams   LocalStack's DynamoDB needs DynamoDB Local, whose licence
#                                rules it out here
#   SES v2                       LocalStack community answers 501 (it serves SES v1 only)
#   CloudFormation               not started: DescribeStacks of `local up` is moto's
# With MOTO_ENDPOINT set, that moto is used; otherwise (as infra/test.sh runs it, so that
# neither leg's load or state reaches the other's) one of its own is started from .venv
# (installed by infra/test.sh, or here if missing).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

LS_VENV="$ROOT/.venv-localstack"
LS_REQS=(
  'localstack-core[runtime]==4.9.2'
  'cbor2<5.7'
  'pyopenssl==24.2.1'
  'cryptography==43.0.3'
  'service_identity==24.1.0'
  'joserfc<1.1'
)
LS_STAMP="$LS_VENV/.installed-$(printf '%s\n' "${LS_REQS[@]}" | cksum | cut -d' ' -f1)"
# shellcheck source=infra/pins.sh
source "$ROOT/infra/pins.sh"

step() { printf '\n==> %s\n' "$*"; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# wait_for URL WHAT SECONDS: until URL answers 200.
wait_for() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys, time, urllib.request
url, what, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = time.time() + secs
while time.time() < deadline:
    try:
        urllib.request.urlopen(url, timeout=1)
        sys.exit(0)
    except Exception:
        time.sleep(0.2)
sys.exit(f"{what} did not answer at {url} within {secs:.0f} s")
PY
}

if [[ ! -f "$LS_STAMP" ]]; then
  step "installing LocalStack (host mode) into .venv-localstack"
  python3 -m venv "$LS_VENV"
  printf '*\n' >"$LS_VENV/.gitignore"
  "$LS_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${LS_REQS[@]}"
  touch "$LS_STAMP"
fi
# The suites of this leg are declared once, as nextest's `localstack` profile
# (.config/nextest.toml, with why each is there): a nextest that reads it, the machine's or the
# pinned one installed into .tools/ when it has none (infra/nextest.sh).
export PATH="$ROOT/.tools/bin:$PATH"
"$ROOT/infra/nextest.sh"
if [[ "${1:-}" == "--install" ]]; then
  exit 0
fi

PIDS=()
TMP="$(mktemp -d -t localstack.XXXXXX)"
cleanup() {
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  # LocalStack's shutdown can hang after "Stopping all services" (seen in CI): ten seconds to
  # stop, then KILL.
  for _ in $(seq 20); do
    local alive=0
    for pid in "${PIDS[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then alive=1; fi
    done
    if [[ $alive -eq 0 ]]; then break; fi
    sleep 0.5
  done
  for pid in "${PIDS[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$TMP/volume"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -z "${MOTO_ENDPOINT:-}" ]]; then
  if [[ ! -x "$ROOT/.venv/bin/moto_server" ]]; then
    step "installing moto into .venv"
    python3 -m venv "$ROOT/.venv"
    "$ROOT/.venv/bin/python" -m pip install --quiet --disable-pip-version-check "$MOTO_REQ"
  fi
  MOTO_PORT="$(free_port)"
  "$ROOT/.venv/bin/moto_server" -H 127.0.0.1 -p "$MOTO_PORT" >"$TMP/moto.log" 2>&1 &
  PIDS+=($!)
  MOTO_ENDPOINT="http://127.0.0.1:$MOTO_PORT"
  wait_for "$MOTO_ENDPOINT/moto-api/" "moto server" 30
  python3 "$ROOT/infra/loopback_only.py" "${PIDS[-1]}" "moto server"
fi

LS_PORT="$(free_port)"
step "starting LocalStack 4.9.2 (host mode) on 127.0.0.1:$LS_PORT (log: $TMP/localstack.log)"
# On loopback only: an unauthenticated AWS emulator must not be reachable from other hosts.
# LocalStack's default gateway server (twisted) listens on 0.0.0.0 whatever GATEWAY_LISTEN
# says (it passes only the port on); hypercorn binds the host given. Checked below.
# Its DNS server is off (DNS_ADDRESS=0): it would listen on 0.0.0.0:53, TCP and UDP.
GATEWAY_SERVER=hypercorn GATEWAY_LISTEN="127.0.0.1:$LS_PORT" DNS_ADDRESS=0 \
  SERVICES=sqs,sns,ses,events,scheduler,secretsmanager \
  LOCALSTACK_VOLUME_DIR="$TMP/volume" \
  SKIP_INFRA_DOWNLOADS=1 DISABLE_EVENTS=1 \
  "$LS_VENV/bin/python" -m localstack.runtime.main >"$TMP/localstack.log" 2>&1 &
PIDS+=($!)
if ! wait_for "http://127.0.0.1:$LS_PORT/_localstack/health" "LocalStack" 120; then
  tail -n 40 "$TMP/localstack.log" >&2
  exit 1
fi
# What `ss -ltunp` would show for it and its children: loopback, or the leg stops here; and
# again after the suite, for anything it started on the way.
LS_PID="${PIDS[-1]}"
python3 "$ROOT/infra/loopback_only.py" "$LS_PID" "LocalStack"


export AWS_ENDPOINT_URL="http://127.0.0.1:$LS_PORT"
export AWS_ENDPOINT_URL_DYNAMODB="$MOTO_ENDPOINT"
export AWS_ENDPOINT_URL_DYNAMODB_STREAMS="$MOTO_ENDPOINT"
export AWS_ENDPOINT_URL_SESV2="$MOTO_ENDPOINT"
export AWS_ENDPOINT_URL_CLOUDFORMATION="$MOTO_ENDPOINT"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION="${AWS_REGION:-us-east-1}"
unset AWS_PROFILE AWS_SESSION_TOKEN

step "the LocalStack leg (SQS, SNS, EventBridge, Secrets Manager at $AWS_ENDPOINT_URL; DynamoDB, Streams, SES v2, CloudFormation at $MOTO_ENDPOINT)"
cargo nextest run --profile localstack --workspace --all-features --locked --no-fail-fast
python3 "$ROOT/infra/loopback_only.py" "$LS_PID" "LocalStack, after the suite"
