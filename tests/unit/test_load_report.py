"""The reliability rig's report: a request executed twice comes with what explains it."""

from __future__ import annotations

from agent_reach.testing.agent_process import LedgerRow
from agent_reach.testing.load import AttemptSeen, History, Load, Record, check

LOAD = Load(("http://127.0.0.1:1",), "churn.act", rate=2, duration_s=1, deadline_s=2)


def _answered(request_id: str, t: float, agent_id: str) -> Record:
    record = Record(request_id, t, deadline_s=2, answer_t=t + 0.01, complete_t=t + 0.01)
    record.status, record.code, record.agent_id = 200, "ok", agent_id
    record.attempts = [AttemptSeen(agent_id, 1, "ok")]
    return record


def test_a_duplicate_execution_is_reported_with_its_answer_and_every_ledger_row() -> None:
    history = History(records=[_answered("req-0", 100.0, "a-1"), _answered("req-1", 100.5, "a-2")])
    ledger = [
        LedgerRow("req-0", "a-1", 11, "trace-0", 100.005, "executed"),
        LedgerRow("req-1", "a-2", 12, "trace-1", 100.505, "executed"),
        LedgerRow("req-1", "a-1", 13, "trace-1", 100.506, "executed"),
        LedgerRow("other", "a-1", 13, None, 100.6, "executed"),  # not this scenario's
    ]

    report = check("churn", LOAD, history, ledger)

    assert (report.duplicate_executions, report.duplicate_ids) == (1, ["req-1"])
    [explained] = report.duplicates
    assert explained["record"]["request_id"] == "req-1"
    assert explained["record"]["attempts"] == [{"agent_id": "a-2", "number": 1, "outcome": "ok"}]
    assert [(row["agent_id"], row["pid"], row["trace_id"]) for row in explained["ledger"]] == [
        ("a-2", 12, "trace-1"),
        ("a-1", 13, "trace-1"),
    ]
    assert report.lost == 0 and report.executions == 3
