"""The policy file re-read while it is being edited: a write that truncates the file
first is seen as an empty file for a moment, which is not an edit."""

from __future__ import annotations

from pathlib import Path

from agent_reach.clock import ManualClock
from agent_reach.policy.source import PolicySource


def test_an_emptied_file_is_an_edit_in_progress_not_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("preset: dispatch\n", encoding="utf-8")
    source = PolicySource(ManualClock(), path)
    assert source().preset == "dispatch"

    path.write_bytes(b"")  # the editor has truncated the file and not written it yet
    assert source.reload() is None
    assert source.last_error is None

    path.write_text("preset: dispatch\nmargin: 0.2\n", encoding="utf-8")
    edited = source.reload()
    assert edited is not None and edited.margin == 0.2


def test_an_unchanged_file_is_no_edit(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("preset: dispatch\n", encoding="utf-8")
    source = PolicySource(ManualClock(), path)
    assert source.reload() is None
