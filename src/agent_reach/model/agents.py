"""Agents as they register: identity, capabilities, transport, lease and routing hints."""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any, Literal

from jsonschema import validators
from jsonschema.exceptions import SchemaError
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    field_validator,
    model_validator,
)

from agent_reach.model.offers import NegotiateSpec
from agent_reach.model.quality import QualityView

DEFAULT_TTL_S = 60.0  # a 60 s lease, renewed at ttl/3 (docs/agent-contract.md)
DEFAULT_CAPACITY = 64  # concurrent deliveries an instance takes before its load factor reaches 0
AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
CAPABILITY_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,127}$"
# A context field path (`product`, `user.intent`): keys joined by dots, no commas or controls.
FIELD_PATH_PATTERN = r"^[^\x00-\x1f\x7f.,]+(\.[^\x00-\x1f\x7f.,]+)*$"

AgentId = Annotated[str, StringConstraints(pattern=AGENT_ID_PATTERN)]
# Transports whose registration may omit capabilities: an A2A card's skills or an MCP
# server's tools give them (`adapters/transports/a2a.py`, `federation/transport.py`).
SELF_DESCRIBING = ("a2a", "mcp")


def check_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema unchanged, or `ValueError` saying why it is not a valid JSON Schema.

    Remote `$ref`s are never fetched (jsonschema resolves only what the schema holds).
    """
    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"input_schema is not a valid JSON Schema: {exc.message}") from None
    return schema


def normalize_capability(tag: Any) -> Any:
    """One spelling per capability: NFKC (full-width look-alikes fold), trimmed, lower case."""
    return unicodedata.normalize("NFKC", tag).strip().lower() if isinstance(tag, str) else tag


# Normalized first, then matched: the pattern listed before the validator is checked by
# pydantic-core itself (listed after it, pydantic checks it in Python, on every request).
Capability = Annotated[
    str, StringConstraints(pattern=CAPABILITY_PATTERN), BeforeValidator(normalize_capability)
]
TimeoutClass = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
# unknown: registered, no probe has answered yet (routable; any instance that answered wins)
HealthStatus = Literal["unknown", "healthy", "suspect", "offline"]


class TransportSpec(BaseModel):
    """How deliveries reach the instance: `type` names a transport module."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    type: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")] = "http"
    endpoint: Annotated[str, StringConstraints(min_length=1, max_length=2048)]
    health_endpoint: Annotated[str, StringConstraints(max_length=2048)] | None = None


Example = Annotated[str, StringConstraints(min_length=1, max_length=500)]
MAX_SCHEMA_PROPERTIES = 64  # input_schema properties a capability may declare


def _object_schema(schema: Any) -> Any:
    """`input_schema` is a JSON Schema object: `properties` maps names to schemas."""
    if schema is None:
        return None
    if not isinstance(schema, dict):
        raise ValueError("input_schema must be a JSON Schema object")
    if schema.get("type", "object") != "object":
        raise ValueError('input_schema must describe an object ("type": "object")')
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) for k, v in properties.items()
    ):
        raise ValueError("input_schema.properties must map names to schemas")
    if len(properties) > MAX_SCHEMA_PROPERTIES:
        raise ValueError(f"input_schema has more than {MAX_SCHEMA_PROPERTIES} properties")
    return schema


def _valid_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if schema is None else check_schema(schema)


# An object JSON Schema for the payload, checked when registered (`invoke.schemas`).
InputSchema = Annotated[
    dict[str, Any] | None, BeforeValidator(_object_schema), AfterValidator(_valid_schema)
]


class SkillSpec(BaseModel):
    """Text for routing to one capability, when the agent-wide description is too broad."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    capability: Capability
    description: Annotated[str, StringConstraints(max_length=4000)] = ""
    examples: Annotated[list[Example], Field(max_length=2000)] = []
    input_schema: InputSchema = None
    # This capability's own declarations (docs/delivery.md); None: as the agent declares.
    safe: StrictBool | None = None
    idempotent: StrictBool | None = None


class AgentSpec(BaseModel):
    """The registration body (docs/api.md); fields beyond these are kept as they are."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    id: AgentId
    display_name: Annotated[str, StringConstraints(max_length=200)] = ""
    # May be omitted for an A2A agent or an MCP server only (`SELF_DESCRIBING`).
    capabilities: Annotated[list[Capability], Field(max_length=256)]
    description: Annotated[str, StringConstraints(max_length=4000)] = ""
    examples: Annotated[list[Example], Field(max_length=2000)] = []
    transport: TransportSpec
    ttl: float = Field(DEFAULT_TTL_S, ge=1, le=86_400)
    timeout_class: TimeoutClass = "query"
    weight: float = Field(1.0, gt=0, le=100)
    capacity: int = Field(DEFAULT_CAPACITY, ge=1, le=100_000)
    max_queue: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="fleet-wide in flight beyond which it is "
        "down-weighted (default: the policy's admission.max_queue)",
    )
    domain: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,64}$")] = "default"
    generic: bool = False
    # Healthy instances each capability of this agent should keep; below it the coordinator
    # emits a scale event (webhook, GET /v1/events) carrying this spec. 0: no minimum.
    min_instances: int = Field(0, ge=0, le=10_000)
    context_fields: Annotated[
        list[Annotated[str, StringConstraints(max_length=256, pattern=FIELD_PATH_PATTERN)]],
        Field(max_length=64),
    ] = []
    skills: Annotated[list[SkillSpec], Field(max_length=256)] = []
    input_schema: InputSchema = Field(
        None, description="JSON Schema of what the capability takes; params are pulled from text"
    )
    # The mesh (docs/mesh.md): what one call spends from a delegation chain's budget, and
    # whether deliveries carry a delegation token even when no delegate rule names it.
    cost: float = Field(0.0, ge=0, le=1_000_000)
    delegation: bool = False
    # Asked for an offer before a delivery (docs/mesh.md, "Negotiation").
    negotiate: NegotiateSpec | None = None
    # "I execute a request id at most once; send it again if unsure" (docs/delivery.md):
    # only such an instance is sent a request whose earlier delivery's outcome is unknown.
    # Strict: "yes" or 1 is refused (422 naming the field), never read as a promise.
    idempotent: StrictBool = False
    # "No side effects": may be re-sent after an unknown outcome, to any instance, and
    # answered from memory (`degraded`) when no instance can answer (docs/delivery.md).
    safe: StrictBool = False

    def is_safe(self, capability: str) -> bool:
        """Whether `capability` is declared safe here (its skill's word, else the agent's)."""
        skill = self._skill_of(capability)
        return self.safe if skill is None or skill.safe is None else skill.safe

    def is_idempotent(self, capability: str) -> bool:
        """Whether `capability` is declared idempotent here (its skill's word, else the
        agent's)."""
        skill = self._skill_of(capability)
        return self.idempotent if skill is None or skill.idempotent is None else skill.idempotent

    def _skill_of(self, capability: str) -> SkillSpec | None:
        if not self.skills:  # most registrations: no generator per delivered answer
            return None
        return next((s for s in self.skills if s.capability == capability), None)

    @field_validator("capabilities")
    @classmethod
    def _unique_capabilities(cls, tags: list[str]) -> list[str]:
        return list(dict.fromkeys(tags))

    @model_validator(mode="before")
    @classmethod
    def _a2a_may_omit_capabilities(cls, data: Any) -> Any:
        if isinstance(data, dict) and "capabilities" not in data:
            transport = data.get("transport")
            if isinstance(transport, dict) and transport.get("type") in SELF_DESCRIBING:
                return {**data, "capabilities": []}
        return data

    @model_validator(mode="after")
    def _capabilities_given(self) -> AgentSpec:
        if not self.capabilities and self.transport.type not in SELF_DESCRIBING:
            raise ValueError(
                "capabilities: give at least one (only an A2A card or an MCP server's tools "
                "may give them)"
            )
        return self

    @model_validator(mode="after")
    def _skills_name_own_capabilities(self) -> AgentSpec:
        unknown = {s.capability for s in self.skills} - set(self.capabilities)
        if unknown:
            raise ValueError(f"skills name capabilities not offered: {sorted(unknown)}")
        return self

    @classmethod
    def from_legacy(cls, document: dict[str, Any]) -> AgentSpec:
        """Accept the original deployment's YAML form ``agent: {id, capability: [...], ...}``."""
        body = dict(document.get("agent", document))
        if "capability" in body and "capabilities" not in body:
            tags = body.pop("capability")
            body["capabilities"] = [tags] if isinstance(tags, str) else tags
        return cls.model_validate(body)


class InstanceStats(BaseModel):
    """What one coordinator has seen of an instance: load, success and latency."""

    in_flight: int
    fleet_in_flight: int = Field(0, description="in flight on every coordinator together")
    capacity: int
    load: float
    calls: int
    success_rate: float | None
    latency_ms_p50: float | None
    latency_ms_p90: float | None


class SkillSemantics(BaseModel):
    """What one capability of an instance declares: safe, idempotent, or neither."""

    safe: bool
    idempotent: bool


class InstanceView(BaseModel):
    """An instance as `GET /v1/agents` shows it."""

    id: str
    display_name: str
    capabilities: list[str]
    domain: str
    generic: bool
    idempotent: bool  # re-sent after an unknown outcome (docs/delivery.md)
    safe: bool = False  # no side effects: re-sent, and answered from memory (docs/delivery.md)
    # Each capability's declarations where a skill says otherwise than the agent.
    semantics: dict[str, SkillSemantics] = {}
    weight: float
    timeout_class: str
    # None for a caller or agent key that does not own the instance (security/visibility.py)
    transport: TransportSpec | None
    status: HealthStatus
    lease_expires_in_s: float
    registered_at: float
    stats: InstanceStats
    disabled: bool = False  # an admin took it out of routing (POST /v1/agents/{id}/disable)
    quality: QualityView | None = None  # its work over the window (mesh/quality.py)


class SkillCard(BaseModel):
    """One capability's own routing text, and what it declares beyond its agent."""

    model_config = ConfigDict(extra="allow")  # declared semantics (`safe`, `idempotent`)

    capability: str
    description: str
    examples: list[str]


class AgentCard(BaseModel):
    """What the router matches an instance by (`GET /v1/agents/{id}/card`)."""

    id: str
    description: str
    examples: list[str]
    skills: list[SkillCard]
    # False: the key sees only some of the instance's capabilities, so the agent-wide
    # description and examples (which may speak of the others) are left out
    complete: bool = True
