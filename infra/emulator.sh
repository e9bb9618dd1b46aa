#!/usr/bin/env bash
# Start the pinned AWS emulator (moto server) in the background on 127.0.0.1:PORT (4566 unless
# given), installing it into .venv first if it is not there, and print the variables that point
# the SDK at it, for the local tour:
#
#   eval "$(infra/emulator.sh)"          # or: eval "$(infra/emulator.sh 4567)"
#   ...
#   kill "$EMULATOR_PID"                 # stop it
#
# A port already taken is refused with what to do, never written into.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=infra/pins.sh
source "$ROOT/infra/pins.sh"
PORT="${1:-4566}"
VENV="$ROOT/.venv"

say() { printf 'infra/emulator.sh: %s\n' "$*" >&2; }

if [[ ! "$PORT" =~ ^[0-9]+$ ]] || ((PORT < 1 || PORT > 65535)); then
  say "the port must be a number from 1 to 65535, not '$PORT' (infra/emulator.sh 4567)"
  exit 2
fi

installed() {
  "$VENV/bin/python" -c \
    "import importlib.metadata as m, sys; sys.exit(m.version('moto') != '$MOTO_VERSION')" \
    2>/dev/null
}
if ! installed; then
  say "installing moto $MOTO_VERSION into .venv (once; about a minute)"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$MOTO_REQ" >&2
fi

if ! "$VENV/bin/python" -c \
  "import socket; s = socket.socket(); s.bind(('127.0.0.1', $PORT))" 2>/dev/null; then
  say "port $PORT is taken (ss -ltnp | grep :$PORT shows by what): stop that, or pass another port: infra/emulator.sh 4567"
  exit 1
fi

LOG="$VENV/moto-$PORT.log"
nohup "$VENV/bin/moto_server" -H 127.0.0.1 -p "$PORT" >"$LOG" 2>&1 &
PID=$!

if ! "$VENV/bin/python" - "$PORT" <<'PY'; then
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/moto-api/"
for _ in range(300):
    try:
        urllib.request.urlopen(url, timeout=1)
        sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit(1)
PY
  kill "$PID" 2>/dev/null || true
  say "moto server did not answer on 127.0.0.1:$PORT within 30 s; its log: $LOG"
  exit 1
fi

echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 EMULATOR_PID=$PID"
say "moto $MOTO_VERSION on 127.0.0.1:$PORT, pid $PID (log: $LOG); stop it with: kill \$EMULATOR_PID"
