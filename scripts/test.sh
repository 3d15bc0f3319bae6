#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -x
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh test
bash scripts/ensure-redis.sh
# Debian packages the suite drives: chromium (browser tests, no downloads); node, java
# and curl (the interop suite's peers and callers, tests/interop).
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium fonts-noto-cjk)
command -v node >/dev/null || missing+=(nodejs)
command -v java >/dev/null || missing+=(default-jdk-headless)
command -v curl >/dev/null || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
.venv/bin/ruff check src tests bench
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
