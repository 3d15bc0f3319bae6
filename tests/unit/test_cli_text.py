"""`kept` text wraps between words, never inside an id with its label, a number with its
unit or a comparison, and leaves no space at a line's end."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.padding import Padding
from rich.table import Table

from agent_reach.cli.text import kept, show

TRACE = "1484dc0f9a2b4c6d8e0f1a2b3c4d5e6f"
LINE = (
    f"request refund-7731 · trace {TRACE} · HTTP 502 · 41.7 ms · +0.24 ms "
    "gap to the next capability 0.057 < 0.15 (margin): refused by the margin rule "
    "score 0.846 [Errno 111] Connection refused"
)
WHOLE = [
    f"trace {TRACE}",
    "request refund-7731",
    "HTTP 502",
    "41.7 ms",
    "+0.24 ms",
    "0.057 < 0.15",
    "score 0.846",
    "Errno 111",
]


def printed(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    show(console, renderable)  # type: ignore[arg-type]
    return console.export_text(styles=False)


# from 50 columns on: every held part (the longest is a trace id, 38 cells) fits a line
@given(st.integers(min_value=50, max_value=120), st.integers(min_value=0, max_value=8))
def test_wrapped_lines_keep_every_join_whole_and_end_without_a_space(
    width: int, indent: int
) -> None:
    out = printed(Padding(kept(LINE), (0, 0, 0, indent), expand=False), width)
    lines = out.splitlines()
    assert all(line == line.rstrip() for line in lines), out
    assert all(len(line) <= width for line in lines), out
    for whole in WHOLE:
        assert any(whole in line for line in lines), (whole, out)
    assert "\u00a0" not in out  # the joins print as plain spaces


def test_a_table_cell_keeps_them_whole_too() -> None:
    table = Table()
    table.add_column("step", no_wrap=True)
    table.add_column("finding")
    table.add_row("registry", kept(LINE))
    for width in (80, 100):
        out = printed(table, width)
        assert all(line == line.rstrip() for line in out.splitlines()), out
        for whole in WHOLE:
            assert any(whole in line for line in out.splitlines()), (whole, out)


def test_a_label_before_a_plain_word_may_break() -> None:
    assert "\u00a0" not in kept("by rule exact").plain  # only ids and numbers are held
