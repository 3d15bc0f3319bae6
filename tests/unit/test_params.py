"""Params pulled out of text by a capability's input_schema: patterns, enums, numbers."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agent_reach.model.agents import AgentSpec
from agent_reach.routing.params import extract_params, with_payload
from agent_reach.routing.quantities import quantities, unit_of_name

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


def test_broken_patterns_are_skipped_and_a_number_property_takes_no_pattern():
    schema = {
        "properties": {
            "count": {"type": "integer", "pattern": "[0-9]+"},
            "broken": {"type": "string", "pattern": "([0-9"},
            "sku": {"type": "string", "pattern": "[A-Z]{2}-[0-9]+"},
            "express": {"type": "boolean"},
        }
    }
    # the count is the number 2, not a pattern's string; AB-12's digits are the sku's
    assert extract_params(schema, "2 of AB-12") == {"sku": "AB-12", "count": 2}


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


def _number(name: str, kind: str = "number", **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": kind, **more}}}


PARCEL = {
    "type": "object",
    "properties": {
        "weight_kg": {"type": "number"},
        "count": {"type": "integer"},
        "destination": {"type": "string", "enum": ["Berlin", "上海"]},
    },
}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("A 3 kg parcel", 3),
        ("a 3kg parcel", 3),
        ("a parcel of 3 kilograms", 3),
        ("寄一个2.5公斤的包裹", 2.5),
        ("寄一个 2.5 千克的包裹", 2.5),
        ("寄一个２公斤的包裹", 2),  # full-width digits
        ("a 1,200 kg pallet", 1200),
        ("a 1,200.5 kg pallet", 1200.5),
        ("weighs 3 kg, yes 3 kg", 3),  # said twice, one value
    ],
)
def test_a_number_written_with_the_unit_the_name_ends_in_fills_it(text, value):
    params = extract_params(_number("weight_kg"), text)
    assert params == {"weight_kg": value}
    assert type(params["weight_kg"]) is type(value)  # 3 stays an int, 2.5 a float


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("order 5 boxes", {"quantity": 5}),
        ("买 1,200 个", {"quantity": 1200}),
        ("set it to -5", {"quantity": -5}),
        ("set it to −5", {"quantity": -5}),  # U+2212, the typeset minus
        ("order 2.5 boxes", {}),  # no integer
        ("order 5 or 6 boxes", {}),  # two values: no guess
        ("order ORD-1234, version 2.5.1, on 2026-12-06 at 10:30", {}),  # none is a number
        ("the 2nd box over 5G", {}),
    ],
)
def test_an_integer_takes_the_one_number_of_the_text(text, expected):
    assert extract_params(_number("quantity", "integer"), text) == expected


def test_a_unit_decides_between_two_numbers_and_a_wrong_unit_fills_nothing():
    assert extract_params(PARCEL, "3 parcels of 2.5 kg to Berlin") == {
        "destination": "Berlin",
        "weight_kg": 2.5,
        "count": 3,
    }
    assert extract_params(PARCEL, "寄2个包裹到上海，每个3公斤") == {
        "destination": "上海",
        "weight_kg": 3,
        "count": 2,
    }
    assert extract_params(PARCEL, "3 kg or 5 kg, 2 of them") == {"count": 2}  # no guess
    assert extract_params(_number("weight_kg"), "a parcel to a town 3 km away") == {}
    assert extract_params(_number("weight_kg"), "weight: 3") == {"weight_kg": 3}  # no unit said
    assert extract_params(_number("amount"), "refund $30 please") == {"amount": 30}
    assert extract_params(_number("price_usd"), "refund $30, or €20") == {"price_usd": 30}


def test_two_numbers_for_two_properties_without_units_fill_neither():
    schema = {"properties": {"quantity": {"type": "integer"}, "price": {"type": "number"}}}
    assert extract_params(schema, "2 apples at 1.5") == {}
    assert extract_params(schema, "apples at 1.5") == {}  # one number, two properties
    assert extract_params(_number("quantity", "integer"), "apples") == {}


def test_a_value_out_of_the_schemas_bounds_and_numbers_inside_string_values_are_left():
    assert extract_params(_number("count", "integer", minimum=1), "send 0 boxes") == {}
    assert extract_params(_number("count", "integer", maximum=10), "send 12 boxes") == {}
    assert extract_params(_number("count", "integer", minimum=1), "send 2 boxes") == {"count": 2}
    order = {
        "properties": {
            "order_no": {"type": "string", "pattern": "[0-9]{3,}"},
            "count": {"type": "integer"},
        }
    }
    assert extract_params(order, "订单 888 再加 2 个") == {"order_no": "888", "count": 2}


def test_nullable_numbers_as_pydantic_writes_them_are_numbers():
    optional = {"properties": {"weight_kg": {"anyOf": [{"type": "number"}, {"type": "null"}]}}}
    assert extract_params(optional, "a 3 kg parcel") == {"weight_kg": 3}
    listed = {"properties": {"weight_kg": {"type": ["number", "null"]}}}
    assert extract_params(listed, "a 3 kg parcel") == {"weight_kg": 3}


@pytest.mark.parametrize(
    ("name", "unit"),
    [
        ("weight_kg", "kg"),
        ("priceUsd", "usd"),
        ("timeout-s", "s"),
        ("weightKG", "kg"),
        ("lead_days", "days"),
        ("kg", None),  # one part: a name, not a unit
        ("count", None),
        ("order_id", None),
    ],
)
def test_a_propertys_unit_is_the_last_part_of_its_name(name, unit):
    assert unit_of_name(name) == unit


def test_quantities_carry_the_unit_written_after_or_the_currency_sign_before():
    found = quantities("$30 or 40%, 3个小时, 3L water, 2 Gifts")
    assert [(q.value, q.unit) for q in found] == [
        (30, "usd"),
        (40, "pct"),
        (3, "h"),
        (3, "l"),
        (2, None),
    ]
    assert [q.value for q in quantities("1,2,3 and 3-5 kg and 12/06")] == []
