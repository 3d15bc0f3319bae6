"""W3C traceparent: continued when valid, replaced when not."""

from __future__ import annotations

import pytest

from agent_reach.observability.tracecontext import continue_trace

VALID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_valid_traceparent_is_continued_with_a_new_span():
    trace = continue_trace(VALID)
    assert trace.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert trace.parent_span_id == "b7ad6b7169203331"
    span_id, header = trace.child_traceparent()
    assert header == f"00-{trace.trace_id}-{span_id}-01"
    assert span_id != "b7ad6b7169203331"


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        "00-" + "0" * 32 + "-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-" + "0" * 16 + "-01",
        VALID + "-extra",
    ],
)
def test_an_invalid_traceparent_starts_a_new_trace(header):
    trace = continue_trace(header)
    assert len(trace.trace_id) == 32 and trace.parent_span_id is None


def test_unsampled_flag_is_kept():
    assert continue_trace(VALID[:-2] + "00").child_traceparent()[1].endswith("-00")
