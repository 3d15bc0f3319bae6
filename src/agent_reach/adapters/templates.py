"""Request templates: Jinja2 in its immutable sandbox, strict about missing values.

Three escapings, one language: XML bodies escape every value, URL paths percent-encode
them, and a JSON body is a structure whose string leaves are templates (a leaf that is
one `{{ expression }}` keeps the value's JSON type).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from jinja2 import StrictUndefined, TemplateError, meta
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from agent_reach.errors import ValidationFailed

_ONE_EXPRESSION = re.compile(r"^\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}$", re.DOTALL)


def _url_quote(value: Any) -> str:
    return quote(str(value), safe="")


def _environment(**options: Any) -> ImmutableSandboxedEnvironment:
    return ImmutableSandboxedEnvironment(undefined=StrictUndefined, **options)


_PLAIN = _environment(autoescape=False)
_XML = _environment(autoescape=True)  # markupsafe's escapes (&amp; &lt; &#34; ...) are XML too
_URL = _environment(autoescape=False, finalize=_url_quote)

Render = Callable[[dict[str, Any]], Any]


def _compile(env: ImmutableSandboxedEnvironment, source: str, where: str) -> Render:
    try:
        template = env.from_string(source)
    except TemplateError as exc:
        raise ValidationFailed(
            f"{where}: the template does not parse: {exc}", code="invalid_template", field=where
        ) from None

    def render(variables: dict[str, Any]) -> str:
        return _run(lambda: template.render(variables), where)

    return render


def _run(step: Callable[[], Any], where: str) -> Any:
    try:
        return step()
    except SecurityError as exc:
        raise ValidationFailed(
            f"{where}: the template tried something the sandbox forbids: {exc}",
            code="template_refused",
            field=where,
        ) from None
    except TemplateError as exc:
        raise ValidationFailed(
            f"{where}: the request lacks a value the template needs: {exc}",
            code="template_error",
            field=where,
        ) from None


def text_template(source: str, where: str) -> Render:
    """A plain text template (headers, form and query values)."""
    return _compile(_PLAIN, source, where)


def xml_template(source: str, where: str) -> Render:
    """An XML template: every value is escaped."""
    return _compile(_XML, source, where)


def url_template(source: str, where: str) -> Render:
    """A URL path template: every value is percent-encoded."""
    return _compile(_URL, source, where)


def json_template(shape: Any, where: str) -> Render:
    """A JSON structure whose string leaves are templates."""
    if isinstance(shape, dict):
        parts = {key: json_template(value, f"{where}.{key}") for key, value in shape.items()}
        return lambda variables: {key: part(variables) for key, part in parts.items()}
    if isinstance(shape, list):
        items = [json_template(value, f"{where}[{i}]") for i, value in enumerate(shape)]
        return lambda variables: [item(variables) for item in items]
    if not isinstance(shape, str):
        return lambda variables: shape
    whole = _ONE_EXPRESSION.match(shape.strip())
    if whole is None:
        return _compile(_PLAIN, shape, where)
    try:
        expression = _PLAIN.compile_expression(whole["expr"], undefined_to_none=False)
    except TemplateError as exc:
        raise ValidationFailed(
            f"{where}: the expression does not parse: {exc}", code="invalid_template", field=where
        ) from None

    def native(variables: dict[str, Any]) -> Any:
        value = _run(lambda: expression(**variables), where)
        if isinstance(value, StrictUndefined):
            _run(lambda: str(value), where)  # raises the strict undefined error
        return value

    return native


def names_used(*sources: str) -> set[str]:
    """The variables the templates read (the sidecar fetches a context only when used)."""
    used: set[str] = set()
    for source in sources:
        used |= meta.find_undeclared_variables(_PLAIN.parse(source))
    return used
