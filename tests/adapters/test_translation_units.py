"""Translations and cards as plain data: templates, mappings, envelopes, card parsing."""

from __future__ import annotations

import pytest

from agent_reach.adapters.a2a_cards import IDEMPOTENT_EXTENSION, card_urls, parse_card
from agent_reach.adapters.translation import CompiledTranslation, parse_translation
from agent_reach.errors import AgentFailed, ValidationFailed

VARIABLES = {"payload": {"sku": "A&B", "qty": 2, "tags": ["x"]}, "text": "hi", "request_id": "r1"}


def _compiled(kind: str = "json", **fields: object) -> CompiledTranslation:
    return CompiledTranslation(parse_translation(dict(fields), kind, "t"))  # type: ignore[arg-type]


def test_json_leaves_keep_their_types_and_strings_are_rendered() -> None:
    request = _compiled(
        body={
            "qty": "{{ payload.qty }}",
            "tags": "{{ payload.tags }}",
            "note": "n={{ payload.qty }}",
        },
        headers={"X-Sku": "{{ payload.sku }}"},
    ).request("http://svc/api", VARIABLES)
    assert request.body == b'{"qty":2,"tags":["x"],"note":"n=2"}'
    assert ("x-sku", "A&B") in request.headers


def test_path_values_are_percent_encoded_and_query_values_url_encoded() -> None:
    request = _compiled(
        method="GET", path="/items/{{ payload.sku }}", query={"q": "{{ text }} & more"}
    ).request("http://svc/", VARIABLES)
    assert request.url == "http://svc/items/A%26B?q=hi+%26+more"


def test_xml_values_are_escaped_and_soap_12_names_the_action_in_the_content_type() -> None:
    request = _compiled(
        "soap", soap_version="1.2", soap_action="urn:Check", body="<s>{{ payload.sku }}</s>"
    ).request("http://svc/ws", VARIABLES)
    assert b"<s>A&amp;B</s>" in request.body
    assert b"http://www.w3.org/2003/05/soap-envelope" in request.body
    assert request.headers == [
        ("content-type", 'application/soap+xml; charset=utf-8; action="urn:Check"')
    ]


def test_missing_values_and_sandbox_escapes_are_refused() -> None:
    with pytest.raises(ValidationFailed) as missing:
        _compiled(body={"a": "{{ payload.nope }}"}).request("http://svc", VARIABLES)
    assert missing.value.code == "template_error"
    with pytest.raises(ValidationFailed) as escape:
        _compiled(body="{{ payload.__class__.__subclasses__() }}").request("http://svc", VARIABLES)
    assert escape.value.code == "template_refused"
    with pytest.raises(ValidationFailed) as bad_path:
        _compiled("xml", response={"map": {"x": "//["}})
    assert bad_path.value.code == "invalid_mapping"


def test_xml_answers_never_expand_entities() -> None:
    translation = _compiled("xml", response={"map": {"text": "string(/r)"}})
    evil = (
        b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/hostname">]><r>a&x;b</r>'
    )
    assert translation.answer(evil) == {"text": "ab"}  # the reference stays unexpanded


def test_soap_11_fault_is_an_agent_error_with_code_and_string() -> None:
    fault = (
        b'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><s:Fault>'
        b"<faultcode>s:Server</faultcode><faultstring>down</faultstring></s:Fault></s:Body>"
        b"</s:Envelope>"
    )
    with pytest.raises(AgentFailed) as failed:
        _compiled("soap").raise_fault(fault)
    assert (failed.value.code, failed.value.retryable) == ("soap_fault", False)
    assert failed.value.details == {"fault_code": "s:Server", "fault_string": "down"}


def test_card_forms_and_skill_tags() -> None:
    assert card_urls("http://a:1") == [
        "http://a:1/.well-known/agent-card.json",
        "http://a:1/.well-known/agent.json",
    ]
    assert card_urls("http://a:1/cards/x.json") == ["http://a:1/cards/x.json"]
    old = parse_card(
        {
            "name": "old",
            "url": "http://a:1/grpc",
            "preferredTransport": "GRPC",
            "additionalInterfaces": [{"url": "http://a:1/rpc", "transport": "JSONRPC"}],
            "skills": [{"id": "Find Flights", "tags": ["Travel", "中文", "a/b"]}],
        }
    )
    assert (old.version, old.rpc_url) == ("0.3", "http://a:1/rpc")
    assert old.skills[0].capabilities == ["find-flights", "travel"]
    with pytest.raises(ValidationFailed, match="no JSONRPC interface"):
        parse_card(
            {
                "name": "grpc-only",
                "supportedInterfaces": [{"url": "x", "protocolBinding": "GRPC"}],
                "skills": [{"id": "a"}],
            }
        )
    declared = {
        "name": "guarded",
        "url": "http://a:1/rpc",
        "capabilities": {"extensions": [{"uri": IDEMPOTENT_EXTENSION}]},
        "skills": [{"id": "a"}],
    }
    assert parse_card(declared).idempotent
    other = {"extensions": [{"uri": "urn:x"}]}
    assert not parse_card({**declared, "capabilities": other}).idempotent
    assert not old.idempotent
    with pytest.raises(ValidationFailed, match="no skills"):
        parse_card({"name": "n", "url": "http://a/rpc", "skills": []})
