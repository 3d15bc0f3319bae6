#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -x
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh test
bash scripts/ensure-redis.sh
# Debian packages the suite drives: chromium (browser tests, no downloads); node, npm,
# java and curl (the interop suite's and the adapter tests' peers and callers); nginx
# (the balancer in front of several coordinators, a TLS peer); openssl (the TLS docs'
# worked example is run as written).
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v java >/dev/null || missing+=(default-jdk-headless)
command -v curl >/dev/null || missing+=(curl)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The TypeScript SDK, built first: the interop suite's Node mesh agent runs on it.
(cd clients/typescript && npm install --no-audit --no-fund --silent && npm run build --silent)
(cd tests/adapters/peers && npm install --no-package-lock --no-audit --no-fund --silent)
(cd tests/identity/idp && npm install --no-package-lock --no-audit --no-fund --silent)
(cd tests/interop/peers && npm install --no-package-lock --no-audit --no-fund --silent)
.venv/bin/ruff check src tests bench
.venv/bin/mypy
# Whole runs only (no pytest arguments): the hot path's budget (bench/hot_path_budget.json:
# bytecodes and frames per /v1/invoke may not grow by more than 5 % unless the change
# records the new figure), then the TypeScript SDK's own tests against a real coordinator
# on memory and on Redis.
if [ $# -eq 0 ]; then
  .venv/bin/python bench/instructions.py --bytecodes --requests 640 --check bench/hot_path_budget.json
  (cd clients/typescript && npm test --silent && npm run test:redis --silent)
fi
# Two pytest workers (pytest-xdist): the suite mostly waits on its peers, so two halve its
# time on two cores. AR_TEST_WORKERS=N sets another count, 0 runs in one process. The
# full-size fault scenarios (AR_RELIABILITY_FULL=1) measure time: they run one at a time.
# `--dist load` hands tests out in collection order, so the browser tests, sorted last
# (tests/conftest.py), stay last on every worker; worksteal let a worker that ran browser
# tests steal others after them, which then met Playwright's loop.
workers=${AR_TEST_WORKERS:-2}
[ -n "${AR_RELIABILITY_FULL:-}" ] && workers=${AR_TEST_WORKERS:-0}
exec .venv/bin/python -m pytest -n "$workers" --dist load "$@"
