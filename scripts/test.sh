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
# The adapter tests reach unchanged services written in Node (Express) and Java.
missing=""
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
command -v java >/dev/null 2>&1 || missing="$missing default-jdk-headless"
if [ -n "$missing" ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  # shellcheck disable=SC2086  # one word per package
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq $missing >/dev/null
fi
(cd tests/adapters/peers && npm install --no-package-lock --no-audit --no-fund --silent)
.venv/bin/ruff check src tests bench
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
