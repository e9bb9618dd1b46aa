#!/usr/bin/env bash
# Measure every figure of BENCHMARKS.md on this machine and write it (see benches/baseline/run.py
# for what is measured and how). Needs only the Rust toolchain, Python 3.11 and pip: installs the
# pinned emulator and the Powertools baseline into .venv-bench (once), builds the release
# bootstraps, the CLI and the `io` bench, then runs. `--quick`: smaller counts, no 1M demo.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv-bench"
PY_REQS=(
  'moto[server,sqs,dynamodb]==5.2.5'
  'waitress==3.0.2'
  'aws-lambda-powertools==3.37.0'
  'boto3==1.44.8'
)
STAMP="$VENV/.installed-$(printf '%s\n' "${PY_REQS[@]}" | cksum | cut -d' ' -f1)"
if [[ ! -f "$STAMP" ]]; then
  echo "==> installing the emulator and the Powertools baseline into .venv-bench"
  python3 -m venv "$VENV"
  printf '*\n' >"$VENV/.gitignore"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PY_REQS[@]}"
  touch "$STAMP"
fi

echo "==> release builds: the three bootstraps, remindctl, the io bench"
cargo build --release -p scheduler -p consumer -p redrive -p remindctl
BENCH_IO="$(cargo bench --bench io --no-run --message-format=json \
  | "$VENV/bin/python" -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "io" and m.get("executable"):
        print(m["executable"])')"
export BENCH_IO

echo "==> measuring"
"$VENV/bin/python" benches/baseline/run.py "$ROOT" "$ROOT/BENCHMARKS.md" "$@"
