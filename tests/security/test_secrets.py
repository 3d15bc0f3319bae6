"""S1 and S15: no secret at rest, in logs, traces, metrics or the dashboard.

A coordinator process (JSON logs at debug level into a file, decision log into another)
gets the admin key from AR_ADMIN_KEY; three more keys are created and every part of the
API is exercised with them, bad and revoked keys included. Then every place a secret
could land is searched for every key and for each key's secret part alone. A second
test walks an in-process coordinator's objects (the memory snapshot of S1).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from attack_kit import (
    ALLOWED_NETWORK,
    CAPABILITY_1,
    CAST,
    METRICS_TOKEN,
    AgentFactory,
    AttackReport,
    ReportFactory,
    World,
    bearer,
    registration,
)
from pydantic import SecretStr

from agent_reach.server.routes.dashboard import DASHBOARD_DIR
from agent_reach.testing.agent_process import CoordinatorProcess

BIG_INTEGER = "1" + "0" * 30


@pytest.fixture
def coordinator_process(
    backend: str,
    admin_key: str,
    policy_file: Path,
    redis_options: dict[str, str],
    tmp_path: Path,
) -> Iterator[CoordinatorProcess]:
    """`agent-reach serve` with keys on, JSON logs at debug level, a decision log file."""
    process = CoordinatorProcess(
        directory=tmp_path,
        backend=backend,
        policy_file=policy_file,
        extra_env={
            "AR_AUTH": "on",
            "AR_ADMIN_KEY": admin_key,
            "AR_METRICS_TOKEN": METRICS_TOKEN,
            "AR_ENDPOINT_ALLOW": ALLOWED_NETWORK,
            "AR_DECISION_LOG": str(tmp_path / "decisions.log"),
            "AR_LOG_LEVEL": "debug",
        },
        **redis_options,
    )
    try:
        yield process.start()
    finally:
        process.stop()


def _exercise(http: httpx.Client, admin_key: str, agent_endpoint: str) -> dict[str, str]:
    """Create the cast's keys and use every part of the API; returns principal -> key."""

    def call(key: str | None, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**bearer(key), **kwargs.pop("headers", {})}
        return http.request(method, path, headers=headers, **kwargs)

    keys = {}
    for principal, (domain, role) in CAST.items():
        body = {"principal": principal, "domain": domain, "role": role}
        keys[principal] = call(admin_key, "POST", "/v1/keys", json=body).json()["key"]
    assert call(METRICS_TOKEN, "GET", "/metrics").status_code == 200  # the scrape token
    call(METRICS_TOKEN[:-1], "GET", "/metrics")  # 401: a misspelled one
    keys["scraper"] = METRICS_TOKEN
    x, a, b = keys["agent-x"], keys["caller-a"], keys["caller-b"]
    spec = registration("x-1", agent_endpoint, CAPABILITY_1)
    assert call(x, "POST", "/v1/agents", json=spec).status_code == 201
    assert call(x, "POST", "/v1/agents/x-1/heartbeat").status_code == 200
    invoke = {"capability": CAPABILITY_1, "payload": {"q": 1}}
    assert call(a, "POST", "/v1/invoke", json=invoke, headers={"cookie": "s=1"}).is_success
    call(a, "POST", "/v1/invoke", json={"text": "read alpha", "suspend": False})
    call(a, "POST", "/v1/route", json={"capability": CAPABILITY_1})
    call(b, "POST", "/v1/invoke", json=invoke)  # 403
    call(None, "GET", f"/v1/agents?api_key={b}&key={a}")  # 401: keys in the query string
    call(a.upper(), "GET", "/v1/agents")  # 401: a misspelled key
    call(None, "GET", "/v1/agents", headers={"authorization": f"Token {a}"})
    http.get("/v1/agents", headers=[("authorization", f"Bearer {a}")] * 2)  # 400
    call(a, "POST", "/v1/invoke", json=invoke, headers={"x-padding": "p" * 20_000})  # 431
    for path, crash in (
        ("/v1/invoke", '{"capability": "alpha.read", "payload": ' + BIG_INTEGER + "}"),
        ("/v1/contexts", '{"document": {"n": ' + BIG_INTEGER + "}}"),
    ):  # 500s for now (see test_malformed_requests): tracebacks in the log
        headers = {"content-type": "application/json", "connection": "close"}
        call(a, "POST", path, content=crash, headers=headers)
    call(a, "POST", "/v1/contexts", json={"document": {"owner": "a"}})
    listed = call(admin_key, "GET", "/v1/keys").json()["keys"]
    revoked = next(k["key_id"] for k in listed if k["principal"] == "caller-b")
    assert call(admin_key, "DELETE", f"/v1/keys/{revoked}").status_code == 204
    call(b, "GET", "/v1/agents")
    return keys


def _surfaces(http: httpx.Client, admin_key: str) -> dict[str, bytes]:
    """What the API shows about itself: traces, decisions, metrics, listings, dashboard."""
    paths = [
        "/v1/traces",
        "/v1/decisions",
        "/metrics",
        "/v1/keys",
        "/v1/policy",
        "/v1/agents",
        "/v1/capabilities",
        "/v1/deadletters",
        "/v1/queues",
        "/openapi.json",
    ]
    traces = http.get("/v1/traces", headers=bearer(admin_key)).json()["traces"]
    paths += [f"/v1/traces/{t['trace_id']}" for t in traces]
    paths += [
        f"/ui/{p.relative_to(DASHBOARD_DIR).as_posix()}"
        for p in sorted(DASHBOARD_DIR.rglob("*"))
        if p.is_file()
    ]
    return {f"GET {path}": http.get(path, headers=bearer(admin_key)).content for path in paths}


def redis_dump(url: str, prefix: str) -> bytes:
    """Every key under `prefix` and every value it holds, whatever its type."""
    parts: list[bytes] = []
    with redis.Redis.from_url(url) as client:
        read = {
            "string": client.get,
            "hash": client.hgetall,
            "set": client.smembers,
            "zset": lambda k: client.zrange(k, 0, -1, withscores=True),
            "list": lambda k: client.lrange(k, 0, -1),
            "stream": client.xrange,
        }
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            parts += [key, *_flatten(read[client.type(key).decode()](key))]
    return b"\n".join(parts)


def _flatten(value: Any) -> Iterator[bytes]:
    """The bytes in a Redis reply, however nested."""
    if isinstance(value, bytes):
        yield value
    elif isinstance(value, dict):
        for pair in value.items():
            yield from _flatten(pair)
    elif isinstance(value, list | tuple | set):
        for item in value:
            yield from _flatten(item)
    elif value is not None:
        yield str(value).encode()


def _search(attack: AttackReport, places: dict[str, bytes], secrets: dict[str, str]) -> None:
    """One attempt per secret and place: found anywhere there is a breach."""
    for place, content in places.items():
        for name, secret in secrets.items():
            count = content.count(secret.encode())
            attack.record(f"{name} in {place}", through=count > 0, occurrences=count)
    attack.figures["places"] = len(places)
    attack.figures["secrets"] = len(secrets)
    attack.figures["occurrences"] = sum(c["occurrences"] for c in attack.cases)


def _secrets(admin_key: str, keys: dict[str, str]) -> dict[str, str]:
    """Each key (and the metrics token), and each key's secret part on its own
    (`ar_<id>_<secret>`)."""
    found = {"AR_ADMIN_KEY": admin_key}
    for principal, key in keys.items():
        found[f"{principal}'s key"] = key
        if key.startswith("ar_"):  # not the scrape token, which is one secret whole
            found[f"{principal}'s secret part"] = key.split("_", 2)[2]
    return found


def test_no_secret_appears_in_logs_traces_metrics_dashboard_or_the_store(
    coordinator_process: CoordinatorProcess,
    start_agent: AgentFactory,
    admin_key: str,
    redis_options: dict[str, str],
    report: ReportFactory,
    tmp_path: Path,
) -> None:
    attack = report("secrets", "S1/S15 secrets at rest and in logs")
    agent = start_agent()
    with httpx.Client(base_url=coordinator_process.url, timeout=10) as http:
        keys = _exercise(http, admin_key, agent.endpoint)
        places = _surfaces(http, admin_key)
    # Reported, not gated: /proc/<pid>/environ keeps the environment a process started
    # with, whatever it unsets later (serve drops AR_ADMIN_KEY from os.environ).
    environ = Path(f"/proc/{coordinator_process.pid}/environ")
    if environ.exists():
        found = environ.read_bytes().count(admin_key.encode())
        attack.figures["info_admin_key_in_proc_environ"] = found
    coordinator_process.stop()  # flushes its log
    places["coordinator log"] = coordinator_process.log_path.read_bytes()
    places["decision log"] = (tmp_path / "decisions.log").read_bytes()
    if redis_options:
        dump = redis_dump(redis_options["redis_url"], redis_options["redis_prefix"])
        assert b"apikey" in dump, "the Redis dump holds no key record: wrong prefix?"
        places["Redis (SCAN of every key and value)"] = dump
    assert b"access_denied" in places["coordinator log"], "the coordinator log is not captured"
    _search(attack, places, _secrets(admin_key, keys))
    attack.assert_nothing_got_through()


def strings_in(root: object) -> Iterator[str]:
    """Every str and bytes reachable from `root` through containers and the attributes of
    Agent-Reach and pydantic objects (a snapshot of what the coordinator holds)."""
    seen: set[int] = set()
    stack: list[object] = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            yield obj
        elif isinstance(obj, bytes | bytearray):
            yield bytes(obj).decode("latin-1")
        elif isinstance(obj, SecretStr):
            stack.append(obj.get_secret_value())
        elif isinstance(obj, dict):
            stack += [*obj.keys(), *obj.values()]
        elif isinstance(obj, list | tuple | set | frozenset | deque):
            stack += list(obj)
        elif type(obj).__module__.startswith(("agent_reach", "pydantic")):
            stack += list(getattr(obj, "__dict__", {}).values())
            for cls in type(obj).__mro__:
                stack += [getattr(obj, s, None) for s in getattr(cls, "__slots__", ())]


def test_the_coordinators_memory_holds_only_digests(
    world: World, report: ReportFactory, backend: str
) -> None:
    attack = report("secrets_in_memory", "S1 secrets in the coordinator's objects")
    for principal in world.keys:
        world.call(principal, "GET", "/v1/agents")  # fills the key cache
    world.invoke("caller-a", CAPABILITY_1)
    strings = [s for c in world.deployment.coordinators for s in strings_in(c.app)]
    assert any(len(s) == 64 for s in strings), "the walk found no digest: it missed the stores"
    keys = {k: v for k, v in world.keys.items() if k != "admin"}
    snapshot = "\n".join(strings).encode()
    _search(
        attack, {f"{backend} coordinator objects": snapshot}, _secrets(world.keys["admin"], keys)
    )
    attack.figures["strings_walked"] = len(strings)
    attack.assert_nothing_got_through()
