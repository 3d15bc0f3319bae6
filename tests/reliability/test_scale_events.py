"""I7 replacement on demand: the only instance of a `min_instances: 1` capability is killed.

Two coordinators on one Redis both see the loss; the scale webhook reaches the receiver
once (deduplicated through the store), signed, carrying the capability, the instances
left and the lost instance's spec. The receiver starts a replacement agent process from
that spec, as an orchestrator would, and traffic recovers. The figure: seconds from the
kill to the first answer given by the replacement. Coordinator B's `GET /v1/events`
stream shows the health transition and the replacement's registration (registry changes
every coordinator sees); the scale event is on the stream of each coordinator that saw
the minimum breached, once: a coordinator that sees the loss only after the replacement
stands saw no breach (whichever sees it first depends on timing, not on the code).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import orjson
import pytest

from agent_reach.clock import SYSTEM_CLOCK
from agent_reach.registry.webhook import EVENT_ID_HEADER, SIGNATURE_HEADER, is_signed_by
from agent_reach.testing.load import Load, LoadRun, check
from agent_reach.testing.waiting import wait_until

POLICY = """
[timeout_classes.query]
timeout_s = 1.0
"""
SECRET = "scale-webhook-secret-for-the-test"
CAPABILITY = "scale.act"
RATE = 20
DURATION_S = 8.0
KILL_AT_S = 1.5
DEADLINE_S = 2.0
SETTLE_S = 10.0  # requests suspended while no instance was up finish on the replacement
REPLACEMENT_WITHIN_S = 10.0  # a Python agent process starts in about a second here
READ_TIMEOUT = httpx.Timeout(5.0, read=30.0)  # the stream sends a keepalive every 15 s


class Receiver:
    """The orchestrator side: a real HTTP server taking webhooks on 127.0.0.1."""

    def __init__(self, on_event: Any) -> None:
        self.deliveries: list[tuple[str, dict[str, Any], bool]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                signed = is_signed_by(SECRET.encode(), body, self.headers[SIGNATURE_HEADER])
                event = orjson.loads(body)
                receiver.deliveries.append((self.headers[EVENT_ID_HEADER], event, signed))
                self.send_response(204)
                self.end_headers()
                if signed and len(receiver.deliveries) == 1:
                    threading.Thread(target=on_event, args=(event,), daemon=True).start()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/scale"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class EventStream:
    """`GET /v1/events` read on a thread; `events` are the decoded `data` lines."""

    def __init__(self, url: str) -> None:
        self.events: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self._thread.start()
        wait_until(lambda: self.is_open, "the event stream to open", 5.0)

    is_open = False

    def _read(self, url: str) -> None:
        try:
            with httpx.stream("GET", f"{url}/v1/events", timeout=READ_TIMEOUT) as answer:
                self.is_open = answer.headers["content-type"].startswith("text/event-stream")
                for line in answer.iter_lines():
                    if line.startswith("data: "):
                        self.events.append(orjson.loads(line.removeprefix("data: ")))
        except httpx.HTTPError:
            if not self._stop.is_set():
                raise  # the coordinator went away while the test still read

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind]

    def close(self) -> None:
        self._stop.set()


@pytest.fixture
def receiver_box() -> Iterator[dict[str, Any]]:
    box: dict[str, Any] = {}
    yield box
    if "receiver" in box:
        box["receiver"].close()


@pytest.mark.redis
@pytest.mark.parametrize(
    "declared_by",
    # the policy's minimum raises the same event (tests/unit/test_fleet_watcher.py): the
    # whole scenario again for it runs with AR_RELIABILITY_FULL=1
    ["registration", pytest.param("policy", marks=pytest.mark.slow)],
)
def test_a_lost_instance_below_min_instances_is_replaced_through_one_signed_webhook(
    rig, redis_url, redis_prefix, report, receiver_box, declared_by
):
    # the minimum comes from the agent's registration, or from the policy alone
    top = f'min_instances = {{ "{CAPABILITY}" = 1 }}\n' if declared_by == "policy" else ""
    policy = top + POLICY  # a top-level key goes before the first table
    declared = 1 if declared_by == "registration" else 0
    started: dict[str, float] = {}

    def start_replacement(event: dict[str, Any]) -> None:
        spec = event["last_spec"]
        replacement = rig.agent(
            "scale-2", spec["capabilities"][0], a.url, min_instances=spec["min_instances"]
        )
        started["at"] = SYSTEM_CLOCK.wall()
        replacement.start()

    receiver = receiver_box["receiver"] = Receiver(start_replacement)
    shared = {
        "backend": "redis",
        "redis_url": redis_url,
        "redis_prefix": redis_prefix,
        "extra_env": {"AR_SCALE_WEBHOOK": receiver.url, "AR_SCALE_WEBHOOK_SECRET": SECRET},
    }
    a, b = rig.coordinator(policy=policy, **shared), rig.coordinator(policy=policy, **shared)
    original = rig.agent("scale-1", CAPABILITY, a.url, min_instances=declared)
    rig.start(original)
    rig.wait_healthy(b.url, [original.agent_id])
    streams = [EventStream(a.url), EventStream(b.url)]
    load = Load((a.url,), CAPABILITY, RATE, DURATION_S, DEADLINE_S, settle_s=SETTLE_S)
    run = LoadRun(load).start()
    rig.timetable().at(KILL_AT_S)
    original.kill()
    killed = run.history.mark("killed", agent_id=original.agent_id)
    history = run.join()
    for stream in streams:
        stream.close()

    # complete_t: a request suspended while no instance was up is answered when it finishes.
    done = [r.complete_t for r in history.records if r.agent_id == "scale-2" and r.complete_t]
    first_answer_s = min(done) - killed.t if done else None
    result = report(
        check(
            f"scale_events-{declared_by}-redis",
            load,
            history,
            rig.ledger(),
            config={"policy": policy, "coordinators": 2},
            figures={
                "webhook_deliveries": len(receiver.deliveries),
                "kill_to_webhook_start_s": round(started["at"] - killed.t, 2) if started else None,
                "kill_to_first_replacement_answer_s": round(first_answer_s, 2)
                if first_answer_s is not None
                else None,
            },
        )
    )
    [(event_id, event, signed)] = receiver.deliveries  # two coordinators saw it: sent once
    assert signed
    assert event["kind"] == "scale" and event["event_id"] == event_id
    assert (event["capability"], event["min_instances"], event["instances_left"]) == (
        CAPABILITY,
        1,
        0,
    )
    assert event["lost"]["agent_id"] == "scale-1"
    assert event["last_spec"]["id"] == "scale-1"
    assert event["last_spec"]["min_instances"] == declared
    assert first_answer_s is not None and first_answer_s <= REPLACEMENT_WITHIN_S
    raised = [[e["event_id"] for e in stream.kinds("scale")] for stream in streams]
    assert [event_id] in raised and all(ids in ([], [event_id]) for ids in raised), raised
    stream = streams[1]  # coordinator B's: registry changes reach every coordinator's feed
    assert any(
        h["agent_id"] == "scale-1" and h["from"] == "healthy" for h in stream.kinds("health")
    )
    assert "scale-2" in {r["agent_id"] for r in stream.kinds("registration")}
    assert result.lost == 0, result.lost_ids  # suspended meanwhile, then served by scale-2
    assert result.duplicate_executions == 0, result.duplicate_ids
