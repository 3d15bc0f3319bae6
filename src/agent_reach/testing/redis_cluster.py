"""A real Redis Cluster on loopback: 3 masters and 3 replicas, each its own `redis-server`.

Each node also listens on its cluster bus port, its port + 10000, so node ports are
chosen below 55536 with both ports free. `kill_master` takes a master down the way a
crash does; its replica is promoted after `NODE_TIMEOUT_MS`, and `restart` brings the
node back empty, as a replica of whoever owns its slots now.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from types import TracebackType

import redis

from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.testing.redis_server import RedisServer

MASTERS = 3
REPLICAS_PER_MASTER = 1
BUS_PORT_OFFSET = 10_000  # Redis Cluster's fixed offset of the node-to-node bus port
# Node ports and their bus ports (20000-32767) stay below the kernel's ephemeral range
# (32768-60999 by default), where outgoing connections could take a port between our
# check that it is free and the node binding it.
PORT_RANGE = (10_000, 22_768)
START_TRIES = 3  # a node whose port was taken after all is moved to other ports
# A master silent this long is failed over: 1 s keeps a test's failover to a few seconds
# (Redis's default, 15 s, suits real networks).
NODE_TIMEOUT_MS = 1000
READY_TIMEOUT_S = 30.0  # create + gossip until every node says cluster_state:ok
POLL_S = 0.05


def _is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_ports(count: int, rng: random.Random | None = None) -> list[int]:
    """`count` ports whose bus ports (port + 10000) are free too."""
    rng = rng or random.Random()
    ports: list[int] = []
    while len(ports) < count:
        port = rng.randrange(*PORT_RANGE)
        taken = {p for q in ports for p in (q, q + BUS_PORT_OFFSET)}
        if {port, port + BUS_PORT_OFFSET} & taken:
            continue
        if _is_free(port) and _is_free(port + BUS_PORT_OFFSET):
            ports.append(port)
    return ports


def node_options() -> tuple[str, ...]:
    """The flags that make a `redis-server` a cluster node (what deploy/ documents too)."""
    return (
        "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
        "--cluster-require-full-coverage", "no",
        # A replica's first full sync starts at once (Redis waits 5 s for more replicas).
        "--repl-diskless-sync-delay", "0",
    )  # fmt: skip


class RedisClusterServer:
    """Six `redis-server` nodes made one cluster by ``redis-cli --cluster create``."""

    def __init__(self, binary: str = "redis-server") -> None:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise FileNotFoundError("'redis-cli' not found: install Redis (apt-get install redis)")
        self.cli = cli
        count = MASTERS * (1 + REPLICAS_PER_MASTER)
        self.nodes = [
            RedisServer(binary, port=port, options=node_options())
            for port in free_cluster_ports(count)
        ]

    @property
    def url(self) -> str:
        """A URL naming one node: the cluster client discovers the others from it."""
        return self.nodes[0].url

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def start(self) -> RedisClusterServer:
        """Start the nodes, join them (slots over 3 masters, one replica each), wait for ok."""
        for index in range(len(self.nodes)):
            self._start_node(index)
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        command = [
            self.cli, "--cluster", "create", *addresses,
            "--cluster-replicas", str(REPLICAS_PER_MASTER), "--cluster-yes",
        ]  # fmt: skip
        created = subprocess.run(  # noqa: S603 - our own arguments
            command,
            capture_output=True,
            timeout=READY_TIMEOUT_S,
            check=False,
        )
        if created.returncode != 0:
            self.close()
            raise RuntimeError(f"redis-cli --cluster create failed:\n{created.stdout.decode()}")
        self.wait_until_ok()
        return self

    def _start_node(self, index: int) -> None:
        for _ in range(START_TRIES - 1):
            try:
                self.nodes[index].start()
                return
            except RuntimeError:  # its port or bus port was taken after all
                failed = self.nodes[index]
                failed.close()
                taken = {q for p in self.ports for q in (p, p + BUS_PORT_OFFSET)}
                port = next(
                    p
                    for p in free_cluster_ports(len(self.nodes) + 1)
                    if not {p, p + BUS_PORT_OFFSET} & taken
                )
                self.nodes[index] = RedisServer(failed.binary, port=port, options=node_options())
        self.nodes[index].start()

    def wait_until_ok(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once every running node reports cluster_state:ok and 3 masters."""
        deadline = SYSTEM_CLOCK.monotonic() + timeout_s
        while not all(self._reports_ok(node.port) for node in self.nodes if node.is_running):
            if SYSTEM_CLOCK.monotonic() > deadline:
                raise RuntimeError(f"cluster on ports {self.ports} not ok after {timeout_s} s")
            time.sleep(POLL_S)

    def masters(self) -> list[RedisServer]:
        """The running nodes that are masters now (failovers change which)."""
        return [n for n in self.nodes if n.is_running and self._role(n.port) == "master"]

    def master_of(self, key: str) -> RedisServer:
        """The running master serving `key`'s slot."""
        slot = self._cli(self.masters()[0].port, "CLUSTER", "KEYSLOT", key).strip()
        for node in self.masters():
            if slot and self._serves(node.port, int(slot)):
                return node
        raise RuntimeError(f"no running master serves slot {slot} of {key!r}")

    def replica_of(self, master: RedisServer) -> RedisServer:
        """The running replica that follows `master`."""
        for node in self.nodes:
            if not node.is_running or node is master:
                continue
            role = self._cli(node.port, "ROLE").splitlines()
            if role[:1] == ["slave"] and len(role) > 2 and role[2].strip() == str(master.port):
                return node
        raise RuntimeError(f"no running replica follows port {master.port}")

    def wait_replicated(self, master: RedisServer, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once a replica of `master` holds every write `master` took so far (WAIT).

        A replica still in its first sync would take over with nothing: a fault scenario
        starting before that measures the rig, not the failover.
        """
        deadline = SYSTEM_CLOCK.monotonic() + timeout_s
        with redis.Redis(port=master.port, socket_timeout=timeout_s) as client:
            while client.execute_command("WAIT", 1, round(POLL_S * 1000)) < 1:
                if SYSTEM_CLOCK.monotonic() > deadline:
                    raise RuntimeError(f"no replica of port {master.port} after {timeout_s} s")

    def wait_promoted(self, node: RedisServer, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once `node` (a replica) says it is a master.

        It asks the node every `POLL_S` over one connection: no redis-cli process per
        look, whose start-up a loaded host would add to the figure.
        """
        deadline = SYSTEM_CLOCK.monotonic() + timeout_s
        with redis.Redis(port=node.port, socket_timeout=timeout_s) as client:
            while client.execute_command("ROLE")[0] not in ("master", b"master"):
                if SYSTEM_CLOCK.monotonic() > deadline:
                    raise RuntimeError(f"port {node.port} not promoted after {timeout_s} s")
                time.sleep(POLL_S)  # the polling period, bounded by the deadline

    def kill_master(self, node: RedisServer) -> None:
        """SIGKILL a master: its replica takes its slots over after the node timeout."""
        node.kill()

    def restart(self, node: RedisServer) -> None:
        """Bring a killed node back: it rejoins from nodes.conf as a replica, empty."""
        node.start()
        self.wait_until_ok()

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    def __enter__(self) -> RedisClusterServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _reports_ok(self, port: int) -> bool:
        info = self._cli(port, "CLUSTER", "INFO")
        return "cluster_state:ok" in info and f"cluster_size:{MASTERS}" in info

    def _is_whole(self) -> bool:
        running = [node.port for node in self.nodes if node.is_running]
        if not all(self._reports_ok(port) for port in running):
            return False
        infos = [self._cli(port, "INFO", "replication") for port in running]
        masters = sum("role:master" in info for info in infos)
        in_sync = sum("master_link_status:up" in info for info in infos)
        return masters == MASTERS and masters + in_sync == len(running)

    def _role(self, port: int) -> str:
        lines = self._cli(port, "ROLE").splitlines()
        return lines[0].strip() if lines else ""

    def _serves(self, port: int, slot: int) -> bool:
        myself = next(
            (line for line in self._cli(port, "CLUSTER", "NODES").splitlines() if "myself" in line),
            "",
        )
        for span in myself.split()[8:]:
            low, _, high = span.partition("-")
            if low.isdigit() and int(low) <= slot <= int(high or low):
                return True
        return False

    def _cli(self, port: int, *command: str) -> str:
        done = subprocess.run(  # noqa: S603 - our own arguments
            [self.cli, "-h", "127.0.0.1", "-p", str(port), *command],
            capture_output=True,
            timeout=5,
            check=False,
        )
        return done.stdout.decode(errors="replace")
