#!/usr/bin/env bash
# Start the pinned AWS emulator (moto server) in the background on 127.0.0.1, installing it into
# .venv first if it is not there, and print the variables that point the SDK at it, for the
# local tour:
#
#   eval "$(infra/emulator.sh)"          # 4566, or a free port when 4566 is taken
#   eval "$(infra/emulator.sh 4567)"     # that port, or a refusal when it is taken
#   ...
#   kill "$EMULATOR_PID"                 # stop it
#
# A port taken is never written into; on any failure the eval fails too (the script prints
# `false`).
set -eEuo pipefail

say() { printf 'infra/emulator.sh: %s\n' "$*" >&2; }
# On failure, what `eval "$(infra/emulator.sh)"` runs: a failing status, not an empty success.
fail() {
  say "$@"
  echo false
  exit 1
}
# Any other command that fails (set -e; -E: in functions too) ends the script the same way.
trap 'say "failed at line $LINENO (above)"; echo false' ERR

ROOT="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
# (A missing file would end the shell before any trap: checked first.)
[[ -f "$ROOT/infra/pins.sh" ]] || fail "$ROOT/infra/pins.sh is missing: run the script of a whole checkout"
# shellcheck source=infra/pins.sh
source "$ROOT/infra/pins.sh"
GIVEN="${1:-}"
PORT="${GIVEN:-4566}"
VENV="$ROOT/.venv"

if [[ ! "$PORT" =~ ^[0-9]+$ ]] || ((10#$PORT < 1 || 10#$PORT > 65535)); then
  fail "the port must be a number from 1 to 65535, not '$PORT' (infra/emulator.sh 4567)"
fi
PORT=$((10#$PORT))

installed() {
  "$VENV/bin/python" -c \
    "import importlib.metadata as m, sys; sys.exit(m.version('moto') != '$MOTO_VERSION')" \
    2>/dev/null
}
if ! installed; then
  say "installing moto $MOTO_VERSION into .venv (once; about a minute)"
  python3 -m venv "$VENV" >&2 ||
    fail "could not make .venv with python3 -m venv (on Debian or Ubuntu: apt install python3-venv)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$MOTO_REQ" >&2 ||
    fail "could not install moto $MOTO_VERSION (pip's error is above)"
fi

# Free to listen on, as moto binds it (with SO_REUSEADDR: the connections a server just stopped
# left in TIME-WAIT do not hold the port); port 0 asks the system for a free one. Prints it.
try_port() {
  "$VENV/bin/python" - "$1" 2>/dev/null <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print(s.getsockname()[1])
PY
}
if ! try_port "$PORT" >/dev/null; then
  if [[ -n "$GIVEN" ]]; then
    fail "port $PORT is taken (ss -ltnp | grep :$PORT shows by what): stop that, or pass another port: infra/emulator.sh 4567"
  fi
  TAKEN="$PORT"
  PORT="$(try_port 0)" || fail "no free port on 127.0.0.1"
  say "port $TAKEN is taken (ss -ltnp | grep :$TAKEN shows by what): using $PORT instead"
fi

# start PORT: moto on PORT, in the background (its pid in PID), until it answers; fails if it
# stops first, or if the server answering on PORT is not this one (another start won the port
# between the check above and the bind: on Linux, /proc tells whose socket listens there).
start() {
  local port="$1"
  # A log of its own until the server is known to be this start's: one that lost the port to
  # another start at the same moment never writes into the winner's.
  LOG="$(mktemp "$VENV/moto-starting.XXXXXX.log")"
  nohup "$VENV/bin/moto_server" -H 127.0.0.1 -p "$port" >"$LOG" 2>&1 &
  PID=$!
  if "$VENV/bin/python" - "$port" "$PID" <<'PY'; then
import os, sys, time, urllib.request
port, pid = int(sys.argv[1]), int(sys.argv[2])

def listens():
    """Whether pid holds the socket listening on 127.0.0.1:port (True without /proc)."""
    if not os.path.isdir("/proc/self/fd"):
        return True
    inodes = set()
    for line in open("/proc/net/tcp").readlines()[1:]:
        f = line.split()
        if f[1].endswith(":%04X" % port) and f[3] == "0A":
            inodes.add(f[9])
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False

def alive():
    """Whether pid runs (a zombie, not yet reaped by the shell, has stopped)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True

for _ in range(300):
    if not alive():
        sys.exit(1)  # it stopped: the port was taken after all, or its log says why
    if listens():
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            sys.exit(0)
        except Exception:
            pass
    time.sleep(0.1)
sys.exit(1)
PY
    mv "$LOG" "$VENV/moto-$port.log"
    LOG="$VENV/moto-$port.log"
    return 0
  fi
  kill "$PID" 2>/dev/null || true
  return 1
}

if ! start "$PORT"; then
  # The default port, taken by another start at the same moment: a free one instead.
  if [[ -n "$GIVEN" ]]; then
    fail "moto server did not start on 127.0.0.1:$PORT within 30 s (or another server took the port); its log: $LOG"
  fi
  TAKEN="$PORT"
  PORT="$(try_port 0)" || fail "no free port on 127.0.0.1"
  say "port $TAKEN was taken as moto started (its log: $LOG): using $PORT instead"
  start "$PORT" || fail "moto server did not start on 127.0.0.1:$PORT within 30 s; its log: $LOG"
fi

echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 EMULATOR_PID=$PID"
say "moto $MOTO_VERSION on 127.0.0.1:$PORT, pid $PID (log: $LOG); stop it with: kill \$EMULATOR_PID"
