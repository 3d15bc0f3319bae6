"""Every link into a section (`file.md#section`, `#section`) of the README and docs/
names a heading that exists, by the anchors GitHub makes of headings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]*#[^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(path: Path) -> set[str]:
    """The anchors of a document's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated one numbered (`-1`, `-2`)."""
    seen: dict[str, int] = {}
    found = set()
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    for heading in HEADING.findall(text):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_anchors_follow_githubs_rule() -> None:
    benchmarks = anchors(REPOSITORY / "docs" / "benchmarks.md")
    assert "added-latency-and-throughput-benchoverheadpy" in benchmarks


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_section_link_names_an_existing_heading(document: Path) -> None:
    text = FENCE.sub("", document.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if "://" in target:
            continue
        file, anchor = target.split("#", 1)
        path = (document.parent / file).resolve() if file else document
        if path.suffix == ".md" and anchor not in anchors(path):
            broken.append(target)
    assert broken == []
