"""One translation: a delivery into the service's own HTTP request, its answer into JSON.

    kind: json | xml | soap     what the request body is (json also covers form and none)
    method, path, query, headers, body, form, soap_version, soap_action
    response: {format: json | xml | text, map: <jmespath> | {name: <jmespath or XPath>},
               namespaces: {prefix: uri}}

Compiled once (a bad template, jmespath or XPath is refused when registered); templates
see `payload`, `text`, `request_id`, `capability`, `trace_id` and, in the sidecar,
`context` (the agent's projection of the request's context).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

import jmespath
import jmespath.exceptions
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_reach.adapters import soap, templates, xml
from agent_reach.errors import AgentFailed, ValidationFailed

Kind = Literal["json", "xml", "soap"]
Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
_DEFAULT_FORMAT = {"json": "json", "xml": "xml", "soap": "xml"}


class AnswerMapping(BaseModel):
    """How the service's answer becomes the result (no `map`: the whole answer)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["json", "xml", "text"] | None = None
    map: str | dict[str, str] | None = None
    namespaces: dict[str, str] = {}


class Translation(BaseModel):
    """The request and answer description of one service call."""

    model_config = ConfigDict(extra="forbid")

    kind: Kind = "json"
    method: Method = "POST"
    path: Annotated[str, Field(max_length=2048)] = ""
    query: dict[str, str] = {}
    headers: dict[str, str] = {}
    body: Any = None
    form: dict[str, str] | None = None
    soap_version: soap.SoapVersion = "1.1"
    soap_action: str | None = None
    response: AnswerMapping = AnswerMapping()


@dataclass(frozen=True, slots=True)
class ServiceRequest:
    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes


def parse_translation(document: dict[str, Any], kind: Kind, where: str) -> Translation:
    """The translation in `document`, as a 422 naming the field when it is wrong."""
    try:
        return Translation.model_validate({**document, "kind": kind})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ValidationFailed(
            f"{where}.{field}: {first['msg']}", code="invalid_translation", field=where
        ) from None


class CompiledTranslation:
    """A translation ready to run: templates, jmespath and XPath all compiled."""

    def __init__(self, spec: Translation, where: str = "transport") -> None:
        self.spec = spec
        self.envelope = soap.Envelope(spec.soap_version) if spec.kind == "soap" else None
        self._path = templates.url_template(spec.path, f"{where}.path")
        self._query = {
            k: templates.text_template(v, f"{where}.query") for k, v in spec.query.items()
        }
        self._headers = {
            k.lower(): templates.text_template(v, f"{where}.headers")
            for k, v in spec.headers.items()
        }
        self._form = (
            None
            if spec.form is None
            else {k: templates.text_template(v, f"{where}.form") for k, v in spec.form.items()}
        )
        self._body = self._compile_body(spec, where)
        self.format = spec.response.format or _DEFAULT_FORMAT[spec.kind]
        self._jmes: Any = None
        self._xpaths: dict[str, Any] = {}
        self._compile_mapping(spec.response, f"{where}.response.map")
        self.names = templates.names_used(*self._sources(spec))

    @staticmethod
    def _compile_body(spec: Translation, where: str) -> templates.Render | None:
        if spec.body is None:
            return None
        if spec.kind == "json":
            return templates.json_template(spec.body, f"{where}.body")
        if not isinstance(spec.body, str):
            raise ValidationFailed(
                f"{where}.body: an {spec.kind} body is one XML template string",
                code="invalid_translation",
                field=f"{where}.body",
            )
        return templates.xml_template(spec.body, f"{where}.body")

    def _compile_mapping(self, mapping: AnswerMapping, where: str) -> None:
        if mapping.map is None:
            return
        if self.format == "xml":
            paths = mapping.map if isinstance(mapping.map, dict) else {"value": mapping.map}
            namespaces = dict(mapping.namespaces)
            if self.envelope is not None:
                namespaces.setdefault("soap", self.envelope.namespace)
            self._xpaths = xml.compile_paths(paths, namespaces, where)
            return
        try:
            if isinstance(mapping.map, str):
                self._jmes = jmespath.compile(mapping.map)
            else:
                self._jmes = {k: jmespath.compile(v) for k, v in mapping.map.items()}
        except jmespath.exceptions.JMESPathError as exc:
            raise ValidationFailed(
                f"{where}: not a valid jmespath expression ({exc})",
                code="invalid_mapping",
                field=where,
            ) from None

    @staticmethod
    def _sources(spec: Translation) -> list[str]:
        sources = [spec.path, *spec.query.values(), *spec.headers.values()]
        sources += list((spec.form or {}).values())
        sources += _leaves(spec.body)
        return sources

    def request(self, endpoint: str, variables: dict[str, Any]) -> ServiceRequest:
        """The service's request for one delivery (ValidationFailed when a value is missing)."""
        url = endpoint.rstrip("/") + self._path(variables) if self.spec.path else endpoint
        if self._query:
            query = urlencode({k: render(variables) for k, render in self._query.items()})
            url += ("&" if "?" in url else "?") + query
        headers: list[tuple[str, str]] = []
        body = b""
        if self.envelope is not None:
            inner = self._body(variables) if self._body is not None else ""
            body = self.envelope.wrap(inner)
            headers += self.envelope.headers(self.spec.soap_action)
        elif self._form is not None:
            body = urlencode({k: render(variables) for k, render in self._form.items()}).encode()
            headers.append(("content-type", "application/x-www-form-urlencoded"))
        elif self._body is not None and self.spec.kind == "xml":
            body = str(self._body(variables)).encode()
            headers.append(("content-type", "application/xml; charset=utf-8"))
        elif self._body is not None:
            body = orjson.dumps(self._body(variables))
            headers.append(("content-type", "application/json"))
        for name, render in self._headers.items():
            headers = [(n, v) for n, v in headers if n != name]
            headers.append((name, render(variables)))
        return ServiceRequest(self.spec.method, url, headers, body)

    def raise_fault(self, body: bytes) -> None:
        """A SOAP fault (whatever the HTTP status) as `soap_fault`; anything else passes."""
        if self.envelope is not None and body.lstrip().startswith(b"<"):
            self.envelope.raise_fault(xml.parse(body))

    def answer(self, body: bytes) -> Any:
        """The result of a 2xx answer, mapped."""
        if self.format == "text":
            return {"text": body.decode("utf-8", "replace")}
        if self.format == "xml":
            root = xml.parse(body)
            if not self._xpaths:
                return {"xml": body.decode("utf-8", "replace")}
            return xml.apply_paths(root, self._xpaths)
        if not body:
            return None
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise AgentFailed(  # it acted and answered: final
                "the service's answer is not JSON", code="agent_bad_answer", retryable=False
            ) from None
        if self._jmes is None:
            return document
        if isinstance(self._jmes, dict):
            return {name: expr.search(document) for name, expr in self._jmes.items()}
        return self._jmes.search(document)


def _leaves(shape: Any) -> list[str]:
    if isinstance(shape, dict):
        return [leaf for value in shape.values() for leaf in _leaves(value)]
    if isinstance(shape, list):
        return [leaf for value in shape for leaf in _leaves(value)]
    return [shape] if isinstance(shape, str) else []
