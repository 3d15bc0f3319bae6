"""The documentation stands alone and keeps up with the code.

`docs/api.md` names every endpoint of the OpenAPI document and every error code the
server can answer (and no other); `docs/configuration.md` every setting with its
default; the complete policy example parses; README and docs link only to files that
exist inside the repository.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from agent_reach import errors
from agent_reach.config import Settings
from agent_reach.policy.delivery import DeliveryPolicy
from agent_reach.policy.policy import Policy
from agent_reach.server.app import create_app
from agent_reach.server.errors import _HTTP_CODES

REPOSITORY = Path(__file__).resolve().parents[2]
SOURCE = REPOSITORY / "src" / "agent_reach"
DOCS = REPOSITORY / "docs"
DOCUMENTS = [REPOSITORY / "README.md", *sorted(DOCS.glob("*.md"))]
REQUIRED_DOCS = ("agent-contract.md", "api.md", "configuration.md", "policy.md")
# Raised on the client side (CLI, SDK, demo, test kit), never answered by a coordinator.
CLIENT_SIDE = ("cli", "sdk", "demo", "testing")
# `error_from_body` makes the first when an answer is no error body at all; the SDK
# raises the others itself (its IdP failed; a task outlasted `wait_s`).
CLIENT_CODES = {"unexpected_answer", "token_unavailable", "task_pending"}
# Raised through a helper or a constant, not a `code=` literal (checked to exist below).
INDIRECT_CODES = {"agent_bad_answer", "agent_response_too_large"}
CODE_LITERAL = re.compile(r"""\bcode\s*=\s*"([a-z_]+)"|_count\([^)]*"([a-z_]+)"\)""")
TABLE_CODE = re.compile(r"^\| `([a-z_]+)` \|", re.MULTILINE)
SETTING_ROW = re.compile(r"^\| `(AR_[A-Z0-9_]+)` \| (.+?) \|", re.MULTILINE)
ENVVAR = re.compile(r'envvar="(AR_[A-Z0-9_]+)"')
LINK = re.compile(r"\]\(([^)]+)\)")


def _text(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _server_codes() -> set[str]:
    """Every error code a coordinator can put on the wire."""
    codes = {cls.code for cls in errors.ERROR_CLASSES.values()} | set(_HTTP_CODES.values())
    codes |= {errors.ReachError.code, "http_error"}
    for path in SOURCE.rglob("*.py"):
        if any(part in CLIENT_SIDE for part in path.relative_to(SOURCE).parts):
            continue
        for match in CODE_LITERAL.finditer(path.read_text(encoding="utf-8")):
            codes.add(match.group(1) or match.group(2))
    source = "".join(p.read_text(encoding="utf-8") for p in SOURCE.rglob("*.py"))
    codes |= {code for code in INDIRECT_CODES if f'"{code}"' in source}
    return codes - CLIENT_CODES


def test_every_endpoint_of_the_openapi_document_is_in_the_api_doc() -> None:
    document = create_app(Settings(decision_log="off")).api.openapi()
    endpoints = {
        f"{method.upper()} {path}" for path, ops in document["paths"].items() for method in ops
    }
    text = _text("api.md")

    assert len(endpoints) > 20
    assert sorted(e for e in endpoints if f"`{e}`" not in text) == []


def test_the_api_doc_lists_exactly_the_error_codes_the_server_answers() -> None:
    documented = set(TABLE_CODE.findall(_text("api.md").split("## Error codes", 1)[1]))
    codes = _server_codes()

    assert {"no_capability", "version_conflict", "invalid_deadline"} <= codes
    assert sorted(codes - documented) == [], "codes missing from docs/api.md"
    assert sorted(documented - codes) == [], "docs/api.md lists codes nothing raises"


def _default(value: Any) -> str:
    """A default as the configuration doc writes it."""
    if value is None or value == []:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    if isinstance(value, list):
        return f"`{','.join(map(str, value))}`"
    return f"`{value}`"


def test_the_configuration_doc_names_every_setting_with_its_default() -> None:
    rows = dict(SETTING_ROW.findall(_text("configuration.md")))
    cli = {n for p in (SOURCE / "cli").glob("*.py") for n in ENVVAR.findall(p.read_text("utf-8"))}
    settings = {
        f"AR_{name.upper()}": field.get_default(call_default_factory=True)
        for name, field in Settings.model_fields.items()
    }

    assert sorted((set(settings) | cli) - set(rows)) == [], "settings missing from the doc"
    assert sorted(set(rows) - set(settings) - cli) == [], "the doc names unknown settings"
    wrong = {
        name: (rows[name], _default(default))
        for name, default in settings.items()
        if rows[name] != _default(default)
    }
    assert wrong == {}


def test_the_complete_policy_example_parses_and_covers_every_section() -> None:
    blocks = re.findall(r"^```toml\n(.*?)^```$", _text("policy.md"), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1
    data = tomllib.loads(blocks[0])

    policy = Policy.model_validate(data)

    assert set(Policy.model_fields) - set(data) == {"weights"}  # shown commented out
    assert set(data["delivery"]) == set(DeliveryPolicy.model_fields)
    assert policy.access.invoke and policy.access.registration and policy.quotas
    assert "report" in policy.timeout_classes


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_documents_link_only_to_files_inside_the_repository(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    targets = [t.split("#", 1)[0] for t in LINK.findall(text) if "://" not in t]

    assert "../" not in text and "shared/" not in text and "/work/" not in text
    missing = [t for t in targets if t and not (document.parent / t).resolve().exists()]
    assert missing == []
    outside = [
        t for t in targets if t and REPOSITORY not in (document.parent / t).resolve().parents
    ]
    assert outside == []


def test_the_readme_links_every_doc() -> None:
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    assert [name for name in REQUIRED_DOCS if f"](docs/{name})" not in readme] == []
