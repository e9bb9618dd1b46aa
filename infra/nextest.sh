#!/usr/bin/env bash
# Makes sure `cargo nextest` is one that reads .config/nextest.toml's profiles (0.9.84 or
# later): the suites are run by it, and the LocalStack leg's are its `localstack` profile. When
# the machine has none, or an older one, the pinned one is installed into .tools/ of this
# checkout, once (a few minutes, from crates.io). Callers put .tools/bin first on their PATH.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$ROOT/.tools/bin:$PATH"
NEXTEST_VERSION=0.9.143
NEXTEST_NEEDED=0.9.84

# "cargo-nextest 0.9.143 (60fa45f63 2026-08-04)": the version is the second word.
have="$(cargo nextest --version 2>/dev/null | awk 'NR == 1 { print $2 }' || true)"
oldest="$(printf '%s\n%s\n' "$NEXTEST_NEEDED" "${have:-0}" | sort -V | head -n 1)"
if [[ -n "$have" && "$oldest" == "$NEXTEST_NEEDED" ]]; then
  exit 0
fi
printf '\n==> installing cargo-nextest %s into .tools/ (found: %s; the suites need %s or later)\n' \
  "$NEXTEST_VERSION" "${have:-none}" "$NEXTEST_NEEDED"
cargo install cargo-nextest --version "=$NEXTEST_VERSION" --locked --root "$ROOT/.tools"
