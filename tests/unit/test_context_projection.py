"""Projections, merge patches, limits and scoped tokens, on plain data and a manual clock."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from agent_reach.clock import ManualClock
from agent_reach.context.limits import count_fields
from agent_reach.context.patch import merge_patch, touched_paths
from agent_reach.context.projection import covers, narrow, parse_fields, project
from agent_reach.context.tokens import TOKEN_PREFIX, Grant, TokenSigner
from agent_reach.errors import NotFound, Unauthorized, ValidationFailed

SECRET = b"k" * 32
DOCUMENT: dict[str, Any] = {
    "product": {"sku": "SKU-778", "name": "手机", "colors": ["蓝", "黑"]},
    "user": {"intent": "buy", "phone": "13800000000", "address": {"city": "杭州"}},
    "price": 2999,
}


def test_a_projection_keeps_only_the_named_fields_nested_as_in_the_document() -> None:
    assert project(DOCUMENT, ["product", "user.intent"]) == {
        "product": DOCUMENT["product"],
        "user": {"intent": "buy"},
    }


def test_a_field_outside_the_document_is_simply_absent() -> None:
    projected = project(DOCUMENT, ["user.intent", "user.age", "missing", "price.amount"])

    assert projected == {"user": {"intent": "buy"}}


def test_overlapping_paths_bring_the_outer_field_whole() -> None:
    assert project(DOCUMENT, ["user.address.city", "user"]) == {"user": DOCUMENT["user"]}


def test_sibling_paths_share_their_parent_object() -> None:
    assert project(DOCUMENT, ["user.address.city", "user.intent"]) == {
        "user": {"address": {"city": "杭州"}, "intent": "buy"}
    }


def test_an_empty_projection_shows_nothing() -> None:
    assert project(DOCUMENT, []) == {}


def test_fields_are_parsed_from_a_comma_list_without_repeats() -> None:
    assert parse_fields("product, user.intent,product,订单.状态") == (
        "product",
        "user.intent",
        "订单.状态",
    )


@pytest.mark.parametrize("text", ["", "a,,b", "a..b", ".a", "a.", "a\x00b", "x" * 300])
def test_malformed_field_lists_are_refused(text: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse_fields(text)

    assert caught.value.code == "invalid_projection"


def test_a_grant_narrows_what_is_asked_for() -> None:
    granted = ("product", "user.intent")

    assert narrow(granted, None) == granted
    assert narrow(None, ("price",)) == ("price",)
    assert narrow(granted, ("product.sku", "price")) == ("product.sku",)
    assert narrow(granted, ("user",)) == ("user.intent",)
    assert narrow(granted, ("price",)) == ()


def test_covers_means_at_or_inside_a_field() -> None:
    assert covers(("user.intent",), ("user", "intent"))
    assert covers(("user",), ("user", "address", "city"))
    assert not covers(("user.intent",), ("user",))
    assert not covers(("user.intent",), ("user", "intentional"))
    assert covers(None, ("anything",))


# RFC 7386, Appendix A: every example, as (original, patch, result).
RFC_7386_EXAMPLES: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "result"), RFC_7386_EXAMPLES)
def test_merge_patch_follows_every_example_of_rfc_7386(
    original: Any, patch: Any, result: Any
) -> None:
    before = orjson.dumps(original)

    assert merge_patch(original, patch) == result
    assert orjson.dumps(original) == before  # the target is not changed in place


def test_nulls_inside_arrays_are_values_not_deletions() -> None:
    assert merge_patch({"a": 1}, {"list": [None, {"x": None}]}) == {
        "a": 1,
        "list": [None, {"x": None}],
    }


@pytest.mark.parametrize(
    ("patch", "touched"),
    [
        ({"user": {"intent": "sell"}}, [("user", "intent")]),
        ({"user": {"phone": None, "age": None}}, [("user", "phone")]),
        ({"user": "anonymous"}, [("user",)]),
        ({"cart": {"items": [1]}}, [("cart", "items")]),
        ({"cart": {}}, [("cart",)]),
        ({"cart": {"gone": None}}, [("cart",)]),
        ({"price": {"amount": 1}}, [("price",)]),
        ({"missing": None}, []),
    ],
)
def test_touched_paths_are_exactly_what_the_merge_changes(
    patch: dict[str, Any], touched: list[tuple[str, ...]]
) -> None:
    assert list(touched_paths(DOCUMENT, patch)) == touched


def test_fields_are_counted_at_every_depth_and_inside_arrays() -> None:
    assert count_fields(DOCUMENT) == 3 + 3 + 3 + 1
    assert count_fields({"turns": [{"a": 1}, {"b": 2, "c": 3}]}) == 4
    assert count_fields({}) == 0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def signer(clock: ManualClock) -> TokenSigner:
    return TokenSigner(SECRET, clock)


GRANT = Grant("ctx-1", ("product",), ("product",))


def test_a_token_carries_its_grant_back(signer: TokenSigner) -> None:
    token = signer.sign(GRANT, ttl_s=300)

    assert token.startswith(TOKEN_PREFIX)
    assert signer.verify(token) == GRANT


def test_a_token_expires_after_its_ttl(signer: TokenSigner, clock: ManualClock) -> None:
    token = signer.sign(GRANT, ttl_s=300)
    clock.advance(299)
    assert signer.verify(token) == GRANT

    clock.advance(1)

    with pytest.raises(Unauthorized) as caught:
        signer.verify(token)
    assert (caught.value.status, caught.value.code) == (401, "token_expired")


def _tamper_payload(token: str) -> str:
    """The same signature over a payload that widens the grant to every field."""
    payload, _, signature = token.removeprefix(TOKEN_PREFIX).partition(".")
    claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["r"] = ["product", "user"]
    forged = base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()
    return f"{TOKEN_PREFIX}{forged}.{signature}"


@pytest.mark.parametrize(
    "tamper",
    [
        _tamper_payload,
        lambda token: token[:-2] + ("AA" if not token.endswith("AA") else "BB"),
        lambda token: token.rpartition(".")[0],
        lambda token: "ctx1.not-base64!.sig",
        lambda token: token.removeprefix(TOKEN_PREFIX),
        lambda token: "",
    ],
    ids=["widened-payload", "changed-signature", "no-signature", "garbage", "no-prefix", "empty"],
)
def test_a_tampered_or_malformed_token_opens_nothing(signer: TokenSigner, tamper: Any) -> None:
    with pytest.raises(NotFound) as caught:
        signer.verify(tamper(signer.sign(GRANT, ttl_s=300)))

    assert caught.value.code == "unknown_context"


def test_a_token_signed_with_another_secret_opens_nothing(
    signer: TokenSigner, clock: ManualClock
) -> None:
    other = TokenSigner(b"o" * 32, clock)

    with pytest.raises(NotFound) as caught:
        signer.verify(other.sign(GRANT, ttl_s=300))

    assert caught.value.code == "unknown_context"
