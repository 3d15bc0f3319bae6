#!/usr/bin/env bash
# Set up and run the demo on the embedded default (memory backend, nothing else to install).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
exec .venv/bin/agent-reach demo "$@"
