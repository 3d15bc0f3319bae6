"""Settings: built once from `AR_*` variables or a TOML/YAML file, then passed in."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent_reach.errors import InvalidRequest

DEFAULT_PORT = 8500  # DESIGN.md: the embedded coordinator listens on 8500
DEFAULT_MAX_BODY_BYTES = (
    1 << 20
)  # 1 MiB: generous for JSON task payloads, small enough to refuse floods


class Settings(BaseSettings):
    """Coordinator settings; every field reads `AR_<NAME>` from the environment."""

    model_config = SettingsConfigDict(env_prefix="AR_", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    cluster_mode: bool = Field(
        False, description="several coordinators share state; needs a shared backend"
    )
    registry_backend: str = Field(
        "memory", description="memory, redis, or an import string package.module:factory"
    )
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_prefix: str = Field("ar", pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    redis_timeout_s: float = Field(0.5, gt=0, le=30)
    registry_resync_s: float = Field(
        5.0, gt=0, description="full reload of a shared registry, to heal missed events"
    )
    policy_file: Path | None = None
    policy_reload_s: float = Field(1.0, gt=0, le=3600, description="how often the file is checked")
    decision_log: str = Field(
        "stdout", description="where routing decisions go: off, stdout, stderr or a file path"
    )
    llm_url: str | None = Field(
        None, description="OpenAI-compatible base URL for the LLM intent parser (optional)"
    )
    llm_model: str = "gpt-4o-mini"
    llm_api_key: str | None = None
    llm_timeout_s: float = Field(3.0, gt=0, le=60)
    probe_interval_s: float = Field(10.0, gt=0, le=3600)  # DESIGN.md: every 10 s
    probe_timeout_s: float = Field(1.0, gt=0, le=60)
    task_ttl_s: float = Field(86_400.0, gt=0, description="how long finished task answers are kept")
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1024)
    log_level: str = "info"
    log_json: bool = True

    @model_validator(mode="after")
    def _cluster_needs_shared_backend(self) -> Settings:
        if self.cluster_mode and self.registry_backend == "memory":
            raise ValueError(
                "AR_CLUSTER_MODE needs a shared backend: set AR_REGISTRY_BACKEND=redis"
            )
        return self

    @classmethod
    def from_file(cls, path: Path, **overrides: Any) -> Settings:
        """Settings from a TOML or YAML file; `overrides` (e.g. CLI flags) win."""
        data = load_mapping(path)
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)


def load_mapping(path: Path, text: str | None = None) -> dict[str, Any]:
    """Parse a TOML (``.toml``) or YAML (anything else) file that must hold a mapping.

    `text`, when given, is the file's content already read.
    """
    if text is None:
        text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise InvalidRequest(
            f"{path}: not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}"
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidRequest(f"{path}: the top level must be a mapping")
    return data
