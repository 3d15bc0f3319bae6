#!/usr/bin/env bash
# Create .venv (Python 3.11+) and install Agent-Reach into it with the given extras.
# Usage: scripts/setup-venv.sh [EXTRAS]   e.g. scripts/setup-venv.sh test
set -euo pipefail
cd "$(dirname "$0")/.."

pick_python() {
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
  echo "Agent-Reach needs Python 3.11 or newer on PATH" >&2
  exit 1
}

if [ ! -x .venv/bin/python ]; then
  "$(pick_python)" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
spec="."
[ -n "${1:-}" ] && spec=".[$1]"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec"
