"""The policy: everything the coordinator decides by, as one versioned document.

Routing (weights, the margin rule, matchers), delivery (timeout classes, retries),
learning, access, identity, delegation, quality, quotas, admission and workflows; each
part is a model of its own (`policy/*`, `model/*`), this one holds them and its version.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from typing import Annotated

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_reach.model.access import AccessPolicy, QuotaRule
from agent_reach.model.admission import AdmissionPolicy
from agent_reach.model.agents import Capability
from agent_reach.model.delegation import DelegationPolicy
from agent_reach.model.identity import IdentityPolicy
from agent_reach.model.intent import IntentEscalation
from agent_reach.model.quality import QualityPolicy
from agent_reach.model.workflows import WorkflowPolicy
from agent_reach.policy.delivery import DEFAULT_TIMEOUT_CLASSES, DeliveryPolicy, TimeoutClassPolicy
from agent_reach.policy.embedding import EmbeddingPolicy
from agent_reach.policy.learning import AdaptationPolicy, LearningPolicy
from agent_reach.policy.weights import PRESETS, Factor

# Both apply to calibrated match confidences (P(routing there is right), fitted on the
# registered catalog by routing/calibration.py), so they hold on any catalog untuned.
DEFAULT_MARGIN = 0.15  # closer than this across capabilities means "do not guess"
DEFAULT_MIN_CONFIDENCE = 0.5  # calibrated: route only when more likely right than wrong
DEFAULT_MATCHERS = ("lexical", "embedding")  # lexical serves alone until the encoder is ready
DEFAULT_MATCH_CACHE_S = 120.0  # issue 3: repeated texts reuse their match this long


class Policy(BaseModel):
    """Everything the coordinator decides by; `version` is a digest of the content."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    preset: Annotated[str, Field(pattern=r"^[a-z_]+$")] = "default"
    weights: dict[Factor, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict)
    margin: float = Field(DEFAULT_MARGIN, ge=0, le=1)
    min_confidence: float = Field(DEFAULT_MIN_CONFIDENCE, ge=0, le=1)
    matchers: list[Annotated[str, Field(pattern=r"^[a-z_]+$")]] = Field(
        default_factory=lambda: list(DEFAULT_MATCHERS),
        description="text matchers, cheapest first; a later one is asked only when unsure",
    )
    confident_at: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict,
        description="matcher -> confidence at which its answer is taken without asking the next",
    )
    match_cache_s: float = Field(DEFAULT_MATCH_CACHE_S, ge=0, le=86_400)
    embedding: EmbeddingPolicy = Field(default_factory=EmbeddingPolicy)
    delivery: DeliveryPolicy = Field(default_factory=DeliveryPolicy)
    learning: LearningPolicy = Field(default_factory=LearningPolicy)
    adaptation: AdaptationPolicy = Field(default_factory=AdaptationPolicy)
    access: AccessPolicy = Field(default_factory=AccessPolicy)
    identity: IdentityPolicy = Field(default_factory=IdentityPolicy)
    delegation: DelegationPolicy = Field(default_factory=DelegationPolicy)
    quality: QualityPolicy = Field(default_factory=QualityPolicy)
    quotas: list[QuotaRule] = Field(default_factory=list)
    admission: AdmissionPolicy = Field(default_factory=AdmissionPolicy)
    intent_parser: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,127}$")] | None = Field(
        None, description="capability whose agent parses unsure texts (routing/intent_parser.py)"
    )
    intent_escalation: IntentEscalation = Field(default_factory=IntentEscalation)
    workflows: WorkflowPolicy = Field(default_factory=WorkflowPolicy)
    min_instances: dict[Capability, Annotated[int, Field(ge=0, le=10_000)]] = Field(
        default_factory=dict,
        description="capability -> healthy instances below which a scale event goes out "
        "(with the registrations' own min_instances, the larger counts)",
    )
    timeout_classes: dict[str, TimeoutClassPolicy] = Field(
        default_factory=lambda: dict(DEFAULT_TIMEOUT_CLASSES),
        description="added to the default classes; naming a default class replaces it",
    )

    @field_validator("timeout_classes", mode="before")
    @classmethod
    def _over_the_defaults(cls, classes: object) -> object:
        return {**DEFAULT_TIMEOUT_CLASSES, **classes} if isinstance(classes, dict) else classes

    @model_validator(mode="after")
    def _known_preset_and_weights(self) -> Policy:
        if not self.weights and self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}: use one of {sorted(PRESETS)}")
        if sum(self.effective_weights.values()) <= 0:
            raise ValueError("at least one factor weight must be positive")
        return self

    @cached_property
    def effective_weights(self) -> dict[str, float]:
        """Custom weights when given, else the preset's."""
        return (
            {str(k): v for k, v in self.weights.items()}
            if self.weights
            else dict(PRESETS[self.preset])
        )

    def deadline_s(self, timeout_class: TimeoutClassPolicy) -> float:
        """The whole-request budget of a class: its own, or every attempt plus the pauses."""
        # By identity: this policy's own classes are worked out once; hashing a model by
        # its fields on every request cost more than the sum itself.
        deadline = self._deadlines.get(id(timeout_class))
        if deadline is None or deadline[0] is not timeout_class:
            deadline = (timeout_class, self._compute_deadline(timeout_class))
            if timeout_class in self.timeout_classes.values():
                self._deadlines[id(timeout_class)] = deadline
        return deadline[1]

    @cached_property
    def longest_deadline_s(self) -> float:
        """The longest class budget: how long an idempotency claim may have to last."""
        return max(self.deadline_s(c) for c in self.timeout_classes.values())

    @cached_property
    def _deadlines(self) -> dict[int, tuple[TimeoutClassPolicy, float]]:
        return {}

    def _compute_deadline(self, timeout_class: TimeoutClassPolicy) -> float:
        if timeout_class.deadline_s is not None:
            return timeout_class.deadline_s
        pauses = sum(self.delivery.backoff(i) for i in range(1, timeout_class.retries + 1))
        return timeout_class.timeout_s * (timeout_class.retries + 1) + pauses

    @cached_property
    def weight_items(self) -> tuple[tuple[str, float], ...]:
        """The effective weights as pairs, for the scoring loop."""
        return tuple(self.effective_weights.items())

    @cached_property
    def version(self) -> str:
        """A short digest of the policy's content: equal content, equal version."""
        digest = hashlib.sha256(
            orjson.dumps(self.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
        )
        return digest.hexdigest()[:12]
