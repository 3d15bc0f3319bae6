"""The demo's tables fit 80 columns, and `--verbose` shows every answer whole."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console

from agent_reach.demo import Row, _table
from agent_reach.demo.scenario import Ask

ANSWER = (
    "订单 A1001：iPhone 15 Pro 手机，已发货，顺丰 SF1234567890，预计明天下午送达，请保持电话畅通"
)


def rendered(verbose: bool) -> list[str]:
    console = Console(width=80, record=True, color_system=None)
    ask = Ask("order.track", "我买的东西怎么还没到，订单 A1001 都三天了")
    row = Row(1, ask, "logistics-01", "order.track", 0.91, 12.3, ANSWER)
    console.print(_table("Customer requests", [row], verbose=verbose))
    return console.export_text().splitlines()


def test_the_table_fits_80_columns_and_cuts_the_answer_to_one_line() -> None:
    lines = rendered(verbose=False)
    assert max(cell_len(line) for line in lines) <= 80
    said, answered = (line for line in lines if "│" in line and "…" in line)
    assert "logistics-01" in said and answered.rstrip("│ ").endswith("…"), lines


def test_verbose_shows_the_whole_answer_within_80_columns() -> None:
    lines = rendered(verbose=True)
    assert max(cell_len(line) for line in lines) <= 80
    cells = "".join(line.split("│")[-2].strip() for line in lines if line.count("│") >= 7)
    assert ANSWER.replace(" ", "") in cells.replace(" ", "")
