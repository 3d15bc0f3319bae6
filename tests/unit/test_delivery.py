"""The delivery's contract headers: encoded in one step, the same as header by header."""

from __future__ import annotations

import pytest

from agent_reach.model.delivery import Delivery

TRACEPARENT = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"


def _delivery(request_id: str) -> Delivery:
    return Delivery(request_id, "echo", {"n": 1}, "a" * 32, hop=4)


def test_encoded_headers_are_the_contract_headers_as_http_lines() -> None:
    delivery = _delivery("order-A1/pay:2.x")
    lines = b"".join(
        b"%s: %s\r\n" % (name.encode(), value.encode())
        for name, value in delivery.headers(TRACEPARENT, 2500)
    )
    assert delivery.encoded_headers(TRACEPARENT, 2500) == lines


@pytest.mark.parametrize("request_id", ["r-1\r\nx-evil: 1", "r 1", "r-\x00", "r-\x7f", "r-é"])
def test_a_request_id_that_is_not_a_plain_token_is_left_to_the_checked_headers(
    request_id: str,
) -> None:
    assert _delivery(request_id).encoded_headers(TRACEPARENT, 2500) is None
