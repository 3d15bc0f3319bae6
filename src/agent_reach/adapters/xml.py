"""XML answers: parsed safely, mapped to JSON with XPath (namespaces declared)."""

from __future__ import annotations

from typing import Any

from lxml import etree

from agent_reach.errors import AgentFailed, ValidationFailed

# No entities, no DTD, no network: an answer can neither read files nor call out (XXE).
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def parse(body: bytes) -> etree._Element:
    """The document's root; `AgentFailed` (`agent_bad_answer`) when it is not XML."""
    try:
        return etree.fromstring(body, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise AgentFailed(  # it acted and answered: final
            f"the service's answer is not XML: {exc}", code="agent_bad_answer", retryable=False
        ) from None


def compile_paths(
    paths: dict[str, str], namespaces: dict[str, str], where: str
) -> dict[str, etree.XPath]:
    """Each name's XPath, compiled now so a bad one is refused at registration."""
    compiled = {}
    for name, path in paths.items():
        try:
            compiled[name] = etree.XPath(path, namespaces=namespaces)
        except etree.XPathSyntaxError as exc:
            raise ValidationFailed(
                f"{where}.{name}: not a valid XPath ({exc})", code="invalid_mapping", field=where
            ) from None
    return compiled


def _plain(value: Any) -> Any:
    """An XPath result as JSON: elements give their text, node lists a list, one item itself."""
    if isinstance(value, list):
        items = [_plain(item) for item in value]
        return items[0] if len(items) == 1 else items
    if isinstance(value, etree._Element):
        return "".join(value.itertext())
    if isinstance(value, bool | float):
        return int(value) if isinstance(value, float) and value.is_integer() else value
    return str(value)


def apply_paths(root: etree._Element, paths: dict[str, etree.XPath]) -> dict[str, Any]:
    """name -> the value its XPath selects in the document (None when nothing matched)."""
    out: dict[str, Any] = {}
    for name, path in paths.items():
        try:
            value = path(root)
        except etree.XPathEvalError as exc:
            raise AgentFailed(
                f"mapping {name!r} failed on the service's answer: {exc}", code="agent_bad_answer"
            ) from None
        out[name] = None if value == [] else _plain(value)
    return out
