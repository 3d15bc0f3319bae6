"""Which remote encoder the settings and the policy ask for, if any."""

from __future__ import annotations

from dataclasses import dataclass

from agent_reach.config import Settings
from agent_reach.policy.policy import Policy

PACKAGED = "packaged"  # the encoder that ships with the package (and stands in for a remote)


@dataclass(frozen=True, slots=True)
class EncoderSpec:
    """An OpenAI-compatible embeddings service, as one comparable value: a new spec means
    a new fit (the vectors of another model are another space)."""

    url: str
    model: str
    api_key: str | None
    query_prefix: str
    passage_prefix: str
    query_input_type: str | None  # the body's `input_type` for a request's text
    passage_input_type: str | None  # ... for a card text (None: no such field sent)
    timeout_s: float
    batch_size: int
    concurrency: int

    @property
    def label(self) -> str:
        """How decisions, `/v1/policy` and metrics name this encoder."""
        return f"remote:{self.model}"


def encoder_spec(settings: Settings, policy: Policy) -> EncoderSpec | None:
    """The remote encoder asked for (the policy's `[embedding]` over the AR_EMBEDDING_*
    settings), or None for the packaged encoder."""
    asked = policy.embedding
    url = asked.url or settings.embedding_url
    if not url:
        return None
    key = settings.embedding_api_key
    return EncoderSpec(
        url=url.rstrip("/"),
        model=asked.model or settings.embedding_model,
        api_key=key.get_secret_value() if key is not None else None,
        query_prefix=_first(asked.query_prefix, settings.embedding_query_prefix),
        passage_prefix=_first(asked.passage_prefix, settings.embedding_passage_prefix),
        query_input_type=asked.query_input_type or settings.embedding_query_input_type,
        passage_input_type=asked.passage_input_type or settings.embedding_passage_input_type,
        timeout_s=settings.embedding_timeout_s,
        batch_size=settings.embedding_batch_size,
        concurrency=settings.embedding_concurrency,
    )


def _first(*values: str | None) -> str:
    return next((v for v in values if v is not None), "")
