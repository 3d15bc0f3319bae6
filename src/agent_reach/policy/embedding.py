"""The embedding matcher's encoder, as the policy names it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EmbeddingPolicy(BaseModel):
    """The embedding matcher's encoder: an OpenAI-compatible embeddings service, or (no
    `url` here nor in AR_EMBEDDING_URL) the packaged one. Unset fields take the
    AR_EMBEDDING_* settings; the API key is a setting only (observers read the policy)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = Field(
        None, pattern=r"^https?://", description="base URL: POST {url}/embeddings"
    )
    model: str | None = Field(None, min_length=1, max_length=256)
    query_prefix: str | None = Field(None, max_length=64, description="before a request's text")
    passage_prefix: str | None = Field(None, max_length=64, description="before a card text")
    query_input_type: str | None = Field(
        None, min_length=1, max_length=64, description="`input_type` sent with a request's text"
    )
    passage_input_type: str | None = Field(
        None, min_length=1, max_length=64, description="`input_type` sent with card texts"
    )
