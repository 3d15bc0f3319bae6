#!/usr/bin/env bash
# Make sure a redis-server answers on 127.0.0.1:6379 for the Redis tests:
# start one if none answers, installing Debian's redis-server package if it is missing.
set -euo pipefail

answers() {
  python3 - <<'PY'
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", 6379), timeout=0.5) as s:
        s.sendall(b"PING\r\n")
        sys.exit(0 if s.recv(64).startswith(b"+PONG") else 1)
except OSError:
    sys.exit(1)
PY
}

answers && exit 0
if ! command -v redis-server >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq redis-server >/dev/null
fi
dir=$(mktemp -d)
redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
  --dir "$dir" --logfile "$dir/redis.log"
for _ in $(seq 50); do answers && exit 0; sleep 0.1; done
echo "redis-server did not come up on 127.0.0.1:6379 (log: $dir/redis.log)" >&2
exit 1
