#!/usr/bin/env bash
# Run every check the project has, on a machine with only the Rust toolchain, Python 3.11 and
# pip: rustfmt, clippy and the crate boundaries, the build of every test (while the pinned
# emulators and linters install into virtual environments of their own, once), then moto server
# on a free 127.0.0.1 port, all tests under nextest, the emulator suites that reach the
# services LocalStack serves again on it beside them (infra/localstack.sh), cfn-lint, sam
# validate and checkov. The emulators are stopped on every exit path.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# The suites run under nextest: the machine's, or the pinned one infra/nextest.sh installs
# into .tools/ when it has none (or an older one), before anything else is built.
export PATH="$ROOT/.tools/bin:$PATH"
infra/nextest.sh

VENV="$ROOT/.venv"
# shellcheck source=infra/pins.sh
source "$ROOT/infra/pins.sh"
PY_REQS=(
  "$MOTO_REQ"
  'cfn-lint==1.58.0'
)
STAMP="$VENV/.installed-$(printf '%s\n' "${PY_REQS[@]}" | cksum | cut -d' ' -f1)"
# aws-sam-cli pins its own boto3: it gets a virtual environment of its own.
SAM_VENV="$ROOT/.venv-sam"
SAM_REQ='aws-sam-cli==1.170.0'
SAM_STAMP="$SAM_VENV/.installed-$(printf '%s\n' "$SAM_REQ" | cksum | cut -d' ' -f1)"
# checkov pins boto3 1.35.x and networkx < 2.7: in .venv it would downgrade the boto3/botocore
# under moto (1.44 -> 1.35) and the networkx under cfn-lint (3.6 -> 2.6), so it gets its own.
CHECKOV_VENV="$ROOT/.venv-checkov"
CHECKOV_REQ='checkov==3.3.30'
CHECKOV_STAMP="$CHECKOV_VENV/.installed-$(printf '%s\n' "$CHECKOV_REQ" | cksum | cut -d' ' -f1)"

# Each step's name with the time it started, so a slow run shows where its time went.
step() { printf '\n==> [%s] %s\n' "$(date +%T)" "$*"; }

# The Python tools (the emulators and the linters) install into virtual environments of their
# own, once; they install in the background while cargo checks and builds, and the tests wait
# for them. LocalStack's environment is infra/localstack.sh's (`--install` does only that).
install_tools() {
  if [[ ! -f "$STAMP" ]]; then
    step "installing the emulator and linters into .venv"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PY_REQS[@]}"
    touch "$STAMP"
  fi
  if [[ ! -f "$SAM_STAMP" ]]; then
    step "installing aws-sam-cli into .venv-sam"
    python3 -m venv "$SAM_VENV"
    "$SAM_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$SAM_REQ"
    touch "$SAM_STAMP"
  fi
  if [[ ! -f "$CHECKOV_STAMP" ]]; then
    step "installing checkov into .venv-checkov"
    python3 -m venv "$CHECKOV_VENV"
    printf '*\n' >"$CHECKOV_VENV/.gitignore"   # as Python 3.13's venv does: never committed
    "$CHECKOV_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$CHECKOV_REQ"
    touch "$CHECKOV_STAMP"
  fi
  infra/localstack.sh --install
}
INSTALL_LOG="$(mktemp -t install.XXXXXX.log)"
step "installing the emulators and linters in the background (log: $INSTALL_LOG)"
install_tools >"$INSTALL_LOG" 2>&1 &
INSTALL_PID=$!
MOTO_PID=
RECORDING=
cleanup() {
  # An install still running (a failed build stops the script early): pip with it.
  if kill -0 "$INSTALL_PID" 2>/dev/null; then
    pkill -TERM -P "$INSTALL_PID" 2>/dev/null || true
    kill "$INSTALL_PID" 2>/dev/null || true
  fi
  if [[ -n "$MOTO_PID" ]]; then
    kill "$MOTO_PID" 2>/dev/null || true
    wait "$MOTO_PID" 2>/dev/null || true
  fi
  rm -f "$RECORDING" "$INSTALL_LOG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "cargo fmt --check"
cargo fmt --all -- --check

# --all-features: every package's `emulator` feature, which runs the tests that need the
# emulator (without it they are listed as ignored); clippy builds the same, so the tests reuse it.
step "cargo clippy --all-targets --all-features -- -D warnings"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings

# The boundaries the crates keep: the core names no AWS SDK, no function links the harness,
# and `cargo demo` (remindctl without its AWS commands) builds from the core and the harness.
step "crate boundaries (cargo tree)"
# normal_deps PACKAGE [FLAGS]: the package's normal dependencies, one per line; a failing
# `cargo tree` stops the script (set -e holds for an assignment), and so does a tree that
# does not start with the package asked for.
normal_deps() {
  local tree
  tree=$(cargo tree --locked -e normal --prefix none -p "$@")
  if [[ "$(head -n 1 <<<"$tree")" != "$1 v"* ]]; then
    echo "cargo tree -p $1 did not list $1 first" >&2
    exit 1
  fi
  printf '%s\n' "$tree"
}
deps=$(normal_deps reminders-core)
if grep -E '^aws-(sdk|config|smithy)' <<<"$deps"; then
  echo "reminders-core depends on the AWS SDK (above): adapters belong in the reminders crate" >&2
  exit 1
fi
for f in scheduler consumer redrive api events feedback; do
  deps=$(normal_deps "$f")
  if grep -E '^reminders-(harness|test-support)' <<<"$deps"; then
    echo "function $f links the test harness or the tests' support" >&2
    exit 1
  fi
done
deps=$(normal_deps remindctl --no-default-features)
if grep -E '^aws-(sdk|config|smithy)' <<<"$deps"; then
  echo "cargo demo's build depends on the AWS SDK (above)" >&2
  exit 1
fi
cargo clippy --locked -p remindctl --no-default-features --all-targets -- -D warnings

# nextest does not run doctests: run them first, so nextest's summary closes the log. They
# need no emulator, nor does the build, which runs while the tools install.
step "doc tests, and every test built"
cargo test --workspace --all-features --locked --doc
cargo nextest run --workspace --all-features --locked --no-run

step "waiting for the emulators and linters to install"
if ! wait "$INSTALL_PID"; then
  cat "$INSTALL_LOG" >&2
  echo "installing the emulators and linters failed (above)" >&2
  exit 1
fi
cat "$INSTALL_LOG"

PORT="$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
LOG="$(mktemp -t moto.XXXXXX.log)"
step "starting moto server on 127.0.0.1:$PORT (log: $LOG)"
# moto's request recorder (tests/consumer/emulator_reads.rs counts reads with it) writes here,
# not into the working directory.
RECORDING="$(mktemp -t moto-recording.XXXXXX)"
MOTO_RECORDER_FILEPATH="$RECORDING" "$VENV/bin/moto_server" -H 127.0.0.1 -p "$PORT" >"$LOG" 2>&1 &
MOTO_PID=$!

"$VENV/bin/python" - "$PORT" <<'PY'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/moto-api/"
for _ in range(300):
    try:
        urllib.request.urlopen(url, timeout=1)
        sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit("moto server did not answer within 30 s")
PY
# Reachable from this machine only (an AWS emulator answers anyone).
python3 infra/loopback_only.py "$MOTO_PID" "moto server"

export AWS_ENDPOINT_URL="http://127.0.0.1:$PORT"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
unset AWS_PROFILE AWS_SESSION_TOKEN

step "tests (emulator at $AWS_ENDPOINT_URL)"
# Test threads get a main thread's stack (8 MiB) instead of libtest's 2 MiB: a test's whole
# pipeline runs as one future on its thread (block_on), and a debug build keeps every
# temporary of a poll function on the stack at once; the local run with the events stream
# came within a few hundred KiB of 2 MiB and overflowed it once. The functions run on their
# process's main thread, whose stack is the system's (8 MiB on Lambda).
export RUST_MIN_STACK="${RUST_MIN_STACK:-8388608}"
# The emulator suites that reach the services LocalStack serves run again against it (host
# mode, installed and started by infra/localstack.sh; nextest's `localstack` profile names
# them). The two legs run side by side once every test is built: both wait mostly on an
# emulator or on the wall clock (a series' occurrences a minute apart). The LocalStack leg
# keeps DynamoDB on a moto of its own, so neither leg's load or state reaches the other's.
LOCALSTACK_LOG="$(mktemp -t localstack-leg.XXXXXX)"
# A process group of its own: stopping this script stops the leg at once, LocalStack, its
# moto and the tests with it (a shell runs its traps only when its foreground command ends).
setsid infra/localstack.sh >"$LOCALSTACK_LOG" 2>&1 &
LOCALSTACK_LEG=$!
stop_leg() {
  kill -TERM -- "-$LOCALSTACK_LEG" 2>/dev/null || true
  wait "$LOCALSTACK_LEG" 2>/dev/null || true
  echo "the LocalStack leg was stopped; its log so far:" >&2
  cat "$LOCALSTACK_LOG" >&2
  rm -f "$LOCALSTACK_LOG"
  cleanup
}
trap stop_leg EXIT
moto_rc=0
cargo nextest run --workspace --all-features --locked --no-fail-fast || moto_rc=$?
localstack_rc=0
wait "$LOCALSTACK_LEG" || localstack_rc=$?
trap cleanup EXIT
step "the LocalStack leg (infra/localstack.sh), run beside the moto suite: its log"
cat "$LOCALSTACK_LOG"
rm -f "$LOCALSTACK_LOG"
if [[ $moto_rc -ne 0 || $localstack_rc -ne 0 ]]; then
  echo "tests failed: the moto suite exited $moto_rc, the LocalStack leg $localstack_rc" >&2
  exit 1
fi

# The HTTP API's contract (the tests hold the router to its status codes); the validator
# comes with moto[server].
step "openapi-spec-validator functions/api/openapi.yaml"
"$VENV/bin/openapi-spec-validator" functions/api/openapi.yaml

step "cfn-lint template.yaml"
"$VENV/bin/cfn-lint" template.yaml
"$VENV/bin/cfn-lint" infra/quickstart.yaml

step "sam validate --lint"
SAM_CLI_TELEMETRY=0 "$SAM_VENV/bin/sam" validate --lint --region us-east-1 -t template.yaml

# Fails on any finding not suppressed in template.yaml (each suppression carries its reason in
# the resource's Metadata). --skip-download: no Prisma Cloud calls (no API key, offline CI).
# checkov does not look inside Fn::If, so on template.yaml as written it never sees a grant a
# condition guards (SMS and push on SNS, SES, the token secrets). So it also scans the template
# rendered by infra/render_template.py for every combination of the three providers (their
# AllowedValues: 3 x 3 x 3 = 27), each provider with the parameters its grants depend on, and
# for the branches those leave out. One checkov process scans all of them (about 30 s here; one
# process per template would take 3.5 s each). A line per template; any failure fails the step.
step "checkov: template.yaml, and rendered for every provider combination"
"$VENV/bin/python" infra/checkov_renders.py "$CHECKOV_VENV/bin/checkov"

step "all checks passed"
