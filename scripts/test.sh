#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -x
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh test
bash scripts/ensure-redis.sh
.venv/bin/ruff check src tests bench
exec .venv/bin/python -m pytest "$@"
