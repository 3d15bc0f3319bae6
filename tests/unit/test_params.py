"""Params pulled out of text by a capability's input_schema: patterns and enums."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_reach.model.agents import AgentSpec
from agent_reach.routing.params import extract_params, with_payload

ORDER = {"type": "object", "properties": {"order_no": {"type": "string", "pattern": "[0-9]{3,}"}}}


def test_the_first_pattern_match_in_the_text_is_the_value():
    assert extract_params(ORDER, "帮我查一下订单 888 的状态") == {"order_no": "888"}
    assert extract_params(ORDER, "订单 12 或者 3456 还是 7890") == {"order_no": "3456"}
    assert extract_params(ORDER, "我的订单怎么样了") == {}


def test_an_enum_value_in_the_text_is_taken_the_longest_first_case_folded():
    schema = {
        "properties": {"speed": {"type": "string", "enum": ["Express", "express plus", "普通"]}}
    }
    assert extract_params(schema, "please send it EXPRESS PLUS") == {"speed": "express plus"}
    assert extract_params(schema, "寄普通快递") == {"speed": "普通"}


def test_non_string_properties_and_broken_patterns_are_skipped():
    schema = {
        "properties": {
            "count": {"type": "integer", "pattern": "[0-9]+"},
            "broken": {"type": "string", "pattern": "([0-9"},
            "sku": {"type": "string", "pattern": "[A-Z]{2}-[0-9]+"},
        }
    }
    assert extract_params(schema, "2 of AB-12") == {"sku": "AB-12"}


def test_fields_the_caller_gave_in_the_payload_win():
    params = extract_params(ORDER, "订单 888")
    assert with_payload(params, ORDER, {"order_no": "999", "other": 1}) == {"order_no": "999"}
    assert with_payload(params, ORDER, ["not", "a", "dict"]) == {"order_no": "888"}


@pytest.mark.parametrize(
    "schema",
    [{"type": "array"}, {"properties": ["order_no"]}, {"properties": {"a": "string"}}, "object"],
)
def test_a_registration_with_a_schema_that_is_no_object_schema_is_refused(schema):
    with pytest.raises(ValidationError, match="input_schema"):
        AgentSpec(
            id="a-1",
            capabilities=["order.query"],
            transport={"endpoint": "http://127.0.0.1:1/"},
            input_schema=schema,
        )
