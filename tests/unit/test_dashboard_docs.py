"""docs/observability.md gives the address of every view the dashboard has."""

from __future__ import annotations

import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
APP = REPOSITORY / "src" / "agent_reach" / "server" / "dashboard" / "js" / "app.js"


def test_every_view_of_the_dashboard_has_its_address_in_the_docs() -> None:
    views = re.search(r"const VIEWS = \{([^}]*)\}", APP.read_text(encoding="utf-8"))
    assert views is not None
    names = [name.strip() for name in views.group(1).split(",")]
    docs = (REPOSITORY / "docs" / "observability.md").read_text(encoding="utf-8")

    assert len(names) >= 11
    assert [name for name in names if f"`/ui/#/{name}" not in docs] == []
