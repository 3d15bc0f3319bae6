"""`PUT /v1/policy`: replaced at run time by an admin, validated, versioned, audited,
and followed by every coordinator sharing a Redis."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis as redis_client
from pydantic import SecretStr
from typer.testing import CliRunner, Result

from agent_reach.cli import app
from agent_reach.config import Settings
from agent_reach.testing.redis_server import RedisServer
from agent_reach.testing.servers import run_coordinator
from agent_reach.testing.waiting import wait_until

ADMIN_KEY = "policy-admin-key-0123456789abcdef"
FAST_RELOAD_S = 0.05


def _settings(**fields: Any) -> Settings:
    return Settings(
        decision_log="off",
        auth="on",
        admin_key=SecretStr(ADMIN_KEY),
        policy_reload_s=FAST_RELOAD_S,
        **fields,
    )


def _admin(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN_KEY}"})


def _caller_key(admin: httpx.Client) -> str:
    made = admin.post(
        "/v1/keys", json={"principal": "order-bot", "domain": "shop", "role": "caller"}
    )
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


@pytest.fixture
def coordinator() -> Iterator[str]:
    with run_coordinator(_settings()) as (url, _):
        yield url


def test_an_admin_replaces_the_policy_and_every_change_is_audited(coordinator):
    with _admin(coordinator) as admin:
        first = admin.get("/v1/policy")
        assert first.headers["etag"] == f'"{first.json()["version"]}"'
        changed = admin.put(
            "/v1/policy",
            json={"preset": "dispatch", "margin": 0.2},
            headers={"if-match": first.headers["etag"]},
        )
        assert changed.status_code == 200, changed.text
        status = admin.get("/v1/policy").json()
        assert status["policy"]["preset"] == "dispatch"
        assert status["policy"]["margin"] == 0.2
        assert status["version"] == changed.json()["status"]["version"] != first.json()["version"]
        assert (status["source"], status["changed_by"]) == ("api", "admin")
        assert status["revision"] == first.json()["revision"] + 1

        changes = admin.get("/v1/policy/changes").json()["changes"]
        newest = changes[0]
        assert (newest["by"], newest["source"]) == ("admin", "api")
        assert newest["before"] == first.json()["version"]
        assert newest["after"] == status["version"]
        assert newest["revision"] == status["revision"]
        assert newest["at"] > 0
        assert changes[-1]["source"] == "defaults"


def test_the_policy_read_is_the_policy_to_write_back(coordinator):
    with _admin(coordinator) as admin:
        shown = admin.get("/v1/policy").json()
        rules = {"invoke": [{"principals": ["role:caller"], "capabilities": ["order.*"]}]}
        edited = {**shown["policy"], "margin": 0.25, "access": rules}
        assert admin.put("/v1/policy", json=edited).status_code == 200
        again = admin.get("/v1/policy").json()
        assert admin.put("/v1/policy", json=again["policy"]).status_code == 200
        assert admin.get("/v1/policy").json()["version"] == again["version"]
        assert again["policy"]["access"]["registration"] == []


def test_an_invalid_policy_is_422_with_its_problems_and_the_old_one_stays(coordinator):
    with _admin(coordinator) as admin:
        before = admin.get("/v1/policy").json()
        refused = admin.put("/v1/policy", json={"margin": 7, "preset": "nonsense", "extra": 1})
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["code"] == "validation_error"
        fields = {p["field"] for p in error["problems"]}
        assert {"margin", "extra"} <= fields
        assert admin.get("/v1/policy").json()["version"] == before["version"]
        assert len(admin.get("/v1/policy/changes").json()["changes"]) == 1  # the defaults


def test_a_stale_if_match_is_409_and_changes_nothing(coordinator):
    with _admin(coordinator) as admin:
        stale = admin.get("/v1/policy").headers["etag"]
        assert admin.put("/v1/policy", json={"margin": 0.3}).status_code == 200
        current = admin.get("/v1/policy").json()["version"]
        conflict = admin.put("/v1/policy", json={"margin": 0.4}, headers={"if-match": stale})
        assert conflict.status_code == 409, conflict.text
        assert conflict.json()["error"]["code"] == "version_conflict"
        assert conflict.json()["error"]["version"] == current
        assert admin.get("/v1/policy").json()["policy"]["margin"] == 0.3


def test_only_an_admin_may_change_or_audit_the_policy_and_a_caller_not_read_it(coordinator):
    with _admin(coordinator) as admin:
        key = _caller_key(admin)
        before = admin.get("/v1/policy").json()
        changes = admin.get("/v1/policy/changes").json()["changes"]
    with httpx.Client(base_url=coordinator, headers={"authorization": f"Bearer {key}"}) as caller:
        assert caller.get("/v1/policy").status_code == 403  # it names everyone's rules
        assert caller.put("/v1/policy", json={"margin": 0.3}).status_code == 403
        assert caller.get("/v1/policy/changes").status_code == 403
    with httpx.Client(base_url=coordinator) as anonymous:
        assert anonymous.put("/v1/policy", json={"margin": 0.3}).status_code == 401
    with _admin(coordinator) as admin:  # the refused writes changed nothing, audited nothing
        assert admin.get("/v1/policy").json() == before
        assert before["policy"]["margin"] != 0.3
        assert admin.get("/v1/policy/changes").json()["changes"] == changes


@pytest.mark.redis
def test_two_coordinators_on_redis_follow_one_policy_and_its_file(tmp_path: Path):
    path = tmp_path / "policy.toml"
    path.write_text("margin = 0.25\n", encoding="utf-8")
    with RedisServer() as redis, ExitStack() as stack:
        shared = {"registry_backend": "redis", "redis_url": redis.url, "redis_prefix": "pol"}
        url_a, _ = stack.enter_context(run_coordinator(_settings(policy_file=path, **shared)))
        url_b, _ = stack.enter_context(run_coordinator(_settings(**shared)))
        a, b = stack.enter_context(_admin(url_a)), stack.enter_context(_admin(url_b))

        # the file is the starting point, for the coordinator without it too
        assert b.get("/v1/policy").json()["policy"]["margin"] == 0.25
        seen_by_b = b.get("/v1/policy").headers["etag"]

        assert a.put("/v1/policy", json={"margin": 0.3}).status_code == 200
        wait_until(
            lambda: b.get("/v1/policy").json()["policy"]["margin"] == 0.3,
            "coordinator B to follow A's change",
        )
        # B's reader made its change on the version before A's: refused on B as well
        stale = b.put("/v1/policy", json={"margin": 0.4}, headers={"if-match": seen_by_b})
        assert stale.status_code == 409, stale.text
        audit = b.get("/v1/policy/changes").json()["changes"]
        assert [(c["source"], c["by"]) for c in audit] == [
            ("api", "admin"),
            ("file", f"file:{path}"),
        ]

        # an edit of the file still hot-reloads, on every coordinator
        path.write_text("margin = 0.35\n", encoding="utf-8")
        for client in (a, b):
            wait_until(
                lambda c=client: c.get("/v1/policy").json()["policy"]["margin"] == 0.35,
                "the edited file to be in force everywhere",
            )

        # a coordinator starting with the same file does not undo a run-time change
        assert b.put("/v1/policy", json={"margin": 0.45}).status_code == 200
        with (
            run_coordinator(_settings(policy_file=path, **shared)) as (url_c, _),
            _admin(url_c) as c,
        ):
            assert c.get("/v1/policy").json()["policy"]["margin"] == 0.45


@pytest.mark.redis
def test_a_redis_that_lost_the_policy_gets_it_back_from_the_coordinators():
    with RedisServer() as redis:
        shared = {"registry_backend": "redis", "redis_url": redis.url, "redis_prefix": "lost"}
        with run_coordinator(_settings(**shared)) as (url, _), _admin(url) as admin:
            assert admin.put("/v1/policy", json={"margin": 0.3}).status_code == 200
            redis.stop()
            redis.start()  # empty: no persistence
            status = wait_until(
                lambda: (p := admin.get("/v1/policy").json())["source"] == "restored" and p,
                "the coordinator to restore the policy",
            )
            assert status["policy"]["margin"] == 0.3
            assert _stored_margin(redis.url) == 0.3


def _stored_margin(url: str) -> float | None:
    with redis_client.Redis.from_url(url) as client:
        document = client.hget("lost:{lost:policy}", "document")
    return None if document is None else float(orjson.loads(document)["margin"])


def test_the_cli_shows_sets_and_audits_the_policy(coordinator, tmp_path: Path):
    file = tmp_path / "policy.toml"
    file.write_text('preset = "dispatch"\n', encoding="utf-8")

    def cli(*args: str) -> Result:
        options = ["--coordinator", coordinator, "--api-key", ADMIN_KEY]
        return CliRunner().invoke(app, ["policy", *args, *options], env={"COLUMNS": "200"})

    before = cli("show")
    with _admin(coordinator) as admin:
        version = admin.get("/v1/policy").json()["version"]
    assert before.exit_code == 0, before.output
    assert f"policy {version} (revision 1, source defaults" in before.output

    changed = cli("set", str(file), "--if-match", version)
    assert changed.exit_code == 0, changed.output
    assert f"policy {version} → " in changed.output and "(revision 2)" in changed.output

    stale = cli("set", str(file), "--if-match", version)
    assert stale.exit_code == 1 and "version_conflict" in stale.output

    audit = cli("changes")
    assert audit.exit_code == 0, audit.output
    assert "admin" in audit.output and "api" in audit.output and "defaults" in audit.output
