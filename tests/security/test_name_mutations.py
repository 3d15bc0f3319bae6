"""S5: mutated names that try to turn a deny into an allow (hypothesis).

Capability names: caller B (allowed `beta.*`) spells agent X's `alpha.read`, and
caller A (allowed `alpha.*`) spells agent Y's `beta.read`, with case changes, percent
and double encoding, `..` segments, trailing dots and slashes, whitespace, Unicode
look-alikes (full-width, mathematical, circled — all NFKC-folded — and Cyrillic or
Greek homoglyphs) and allowed prefixes glued in front. A bypass is the other agent
receiving the request, or a route decision naming it.

Paths: admin-only and owner-only URLs and the authenticated ones are requested with the
same mutations applied to the path, sent verbatim over a socket, and with other
methods and method-override headers. A bypass is any answer that did what the
unmutated request is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from attack_kit import (
    CAPABILITY_1,
    CAPABILITY_2,
    AttackReport,
    Headers,
    RawAnswer,
    ReportFactory,
    World,
    exchange,
    request_head,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = 250
PATH_EXAMPLES = 300
HYPOTHESIS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    # The coordinator is deliberately shared by every example: it is the system under attack.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SEPARATORS = ["/../", "/./", "./", "../", "..", "%2e%2e/", "%2E%2E%2F", "..%2f", ".%2e/", "//"]
AFFIXES = [".", "..", "/", "./", "%2e", "%2f", "%00", "\x00", " ", "\t", "\n", "\r\n", "\u00a0"]
AFFIXES += ["\u200b", "\u3000", "\ufeff", "#", "?", ";", "*", ".*", "%20", "%09", "\\"]
HOMOGLYPHS = {
    "a": "аɑα",
    "e": "еε",
    "o": "оο",
    "p": "рρ",
    "c": "сϲ",
    "l": "ӏι1",
    "i": "іı",
    "s": "ѕſ",
    "t": "τт",
    "r": "г",
    "d": "ԁ",
    "h": "һ",
    "b": "Ьβ",
    "k": "κK",  # the second is the Kelvin sign, which NFKC folds to K
    "y": "у",
    ".": "。．﹒․",
    "/": "／∕⁄",
}


def folded_lookalikes(char: str) -> list[str]:
    """Characters NFKC turns into `char`: full-width, mathematical bold, circled."""
    found = []
    if "!" <= char <= "~":
        found.append(chr(ord(char) - 0x21 + 0xFF01))
    if "a" <= char <= "z":
        found += [chr(0x1D41A + ord(char) - ord("a")), chr(0x24D0 + ord(char) - ord("a"))]
    return found


@st.composite
def mutated(draw: st.DrawFn, name: str, prefixes: tuple[str, ...] = ()) -> str:
    """`name` after one to four mutations, each drawn with its parameters."""
    text = name
    for kind in draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=4)):
        text = kind(draw, text, prefixes)
    return text


Mutation = Callable[[st.DrawFn, str, tuple[str, ...]], str]


def _positions(draw: st.DrawFn, text: str) -> set[int]:
    return draw(st.sets(st.integers(0, max(0, len(text) - 1)), min_size=1, max_size=4))


def _case(draw: st.DrawFn, text: str, _: tuple[str, ...]) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(c.swapcase() if flip else c for c, flip in zip(text, flips, strict=True))


def _percent(draw: st.DrawFn, text: str, _: tuple[str, ...]) -> str:
    twice = draw(st.booleans())
    hexes = "%25{:02X}" if twice else draw(st.sampled_from(["%{:02X}", "%{:02x}"]))
    chosen = _positions(draw, text)
    return "".join(
        "".join(hexes.format(b) for b in c.encode()) if i in chosen else c
        for i, c in enumerate(text)
    )


def _segments(draw: st.DrawFn, text: str, _: tuple[str, ...]) -> str:
    at = draw(st.integers(0, len(text)))
    return text[:at] + draw(st.sampled_from(SEPARATORS)) + text[at:]


def _affix(draw: st.DrawFn, text: str, _: tuple[str, ...]) -> str:
    affix = draw(st.sampled_from(AFFIXES))
    return text + affix if draw(st.booleans()) else affix + text


def _inside(draw: st.DrawFn, text: str, _: tuple[str, ...]) -> str:
    at = draw(st.integers(0, len(text)))
    return text[:at] + draw(st.sampled_from(AFFIXES)) + text[at:]


def _lookalike(draw: st.DrawFn, text: str, _: tuple[str, ...]) -> str:
    chosen = _positions(draw, text)
    out = []
    for i, c in enumerate(text):
        options = [*folded_lookalikes(c), *HOMOGLYPHS.get(c, "")]
        out.append(draw(st.sampled_from(options)) if i in chosen and options else c)
    return "".join(out)


def _prefix(draw: st.DrawFn, text: str, prefixes: tuple[str, ...]) -> str:
    if not prefixes:
        return text
    return draw(st.sampled_from(prefixes)) + draw(st.sampled_from(["", "/", "/../", "."])) + text


MUTATIONS: list[Mutation] = [_case, _percent, _segments, _affix, _inside, _lookalike, _prefix]


@dataclass(frozen=True)
class Target:
    """A capability the principal may not invoke, the agent behind it, and what it may."""

    principal: str
    capability: str
    agent_id: str
    allowed_prefixes: tuple[str, ...]


TARGETS = [
    Target("caller-b", CAPABILITY_1, "x-1", ("beta.", "beta.read", "beta.*", "*")),
    Target("caller-a", CAPABILITY_2, "y-1", ("alpha.", "alpha.read", "alpha.*", "*")),
]


@st.composite
def capability_attacks(draw: st.DrawFn) -> tuple[Target, str]:
    target = draw(st.sampled_from(TARGETS))
    return target, draw(mutated(target.capability, target.allowed_prefixes))


@pytest.fixture
def capability_attack(report: ReportFactory) -> AttackReport:
    return report("name_mutations_capabilities", "S5 capability name mutations")


@HYPOTHESIS
@given(attack=capability_attacks())
def test_no_spelling_of_a_denied_capability_reaches_its_agent(
    world: World, capability_attack: AttackReport, attack: tuple[Target, str]
) -> None:
    target, spelling = attack
    agent = world.x if target.agent_id == "x-1" else world.y
    before = len(agent.agent.received)
    invoked = world.invoke(target.principal, spelling)
    routed = world.call(target.principal, "POST", "/v1/route", json={"capability": spelling})
    chosen = routed.json().get("agent_id") if routed.status_code == 200 else None
    through = len(agent.agent.received) > before or chosen == target.agent_id
    capability_attack.record(
        f"{target.principal} -> {spelling!r}",
        through=through,
        invoke_status=invoked.status_code,
        route_status=routed.status_code,
        reached=target.agent_id,
    )
    capability_attack.assert_nothing_got_through()


@dataclass(frozen=True)
class Surface:
    """A request refused to `principal` but not to `owner`; `bypassed` tells from an
    answer whether it got in."""

    principal: str | None
    owner: str
    method: str
    path: str
    body: bytes
    bypassed: Callable[[World, RawAnswer], bool]


def _x_is_gone(world: World, answer: RawAnswer) -> bool:
    return answer.status == 204 or world.stored("x-1") is None


def _renewed(_: World, answer: RawAnswer) -> bool:
    return b'"ttl"' in answer.body


SURFACES = [
    Surface("caller-a", "admin", "GET", "/v1/keys", b"", lambda _, a: b'"keys"' in a.body),
    Surface(
        "caller-a",
        "admin",
        "POST",
        "/v1/keys",
        b'{"principal": "sneaky", "domain": "a", "role": "admin"}',
        lambda _, a: b'"key"' in a.body,
    ),
    Surface("agent-y", "agent-x", "POST", "/v1/agents/x-1/heartbeat", b"", _renewed),
    Surface(None, "caller-b", "GET", "/v1/agents", b"", lambda _, a: b'"agents"' in a.body),
    Surface("caller-b", "observer", "GET", "/metrics", b"", lambda _, a: b"# HELP" in a.body),
    Surface(
        None,
        "caller-a",
        "POST",
        "/v1/invoke",
        b'{"capability": "alpha.read"}',
        lambda _, a: a.status == 200,
    ),
    Surface("agent-y", "agent-x", "DELETE", "/v1/agents/x-1", b"", _x_is_gone),  # keep it last
]


def send(
    world: World,
    surface: Surface,
    target: bytes,
    extra: Headers = (),
    method: str | None = None,
    principal: str | None = None,
) -> RawAnswer:
    """The surface's request with `target` as the request target and `extra` headers,
    sent as bytes as they are; `method` and `principal` replace the surface's own."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(surface.body)),
    ]
    who = principal or surface.principal
    if who is not None:
        headers.append((b"authorization", b"Bearer " + world.keys[who].encode()))
    head = request_head(method or surface.method, target, [*headers, *extra])
    return exchange(world.deployment.first.url, head, [surface.body])


@st.composite
def path_attacks(draw: st.DrawFn) -> tuple[Surface, bytes]:
    surface = draw(st.sampled_from(SURFACES))
    spelling = draw(mutated(surface.path.lstrip("/")))
    return surface, ("/" + spelling).encode("utf-8", "surrogatepass")


@pytest.fixture
def path_attack(report: ReportFactory) -> AttackReport:
    return report("name_mutations_paths", "S5 path mutations")


@settings(HYPOTHESIS, max_examples=PATH_EXAMPLES)
@given(attack=path_attacks())
def test_no_spelling_of_a_refused_path_gets_in(
    world: World, path_attack: AttackReport, attack: tuple[Surface, bytes]
) -> None:
    surface, target = attack
    answer = send(world, surface, target)
    through = surface.bypassed(world, answer)
    path_attack.record(
        f"{surface.principal or 'anonymous'} {surface.method} {target!r}",
        through=through,
        status=answer.status,
        body=answer.body[:200],
    )
    path_attack.assert_nothing_got_through()


OVERRIDES = [b"x-http-method-override", b"x-method-override", b"x-http-method"]


def test_other_methods_and_method_overrides_do_not_get_in(
    world: World, report: ReportFactory
) -> None:
    attack = report("method_overrides", "S5 methods and method overrides")
    for surface in SURFACES:
        for method in ("HEAD", "OPTIONS", "GET", "POST", "PUT", "PATCH", "DELETE", "get"):
            answer = send(
                world, Surface(**{**surface.__dict__, "method": method}), surface.path.encode(), []
            )
            attack.record(
                f"{surface.principal or 'anonymous'} {method} {surface.path}",
                through=surface.bypassed(world, answer),
                status=answer.status,
            )
        for header in OVERRIDES:
            carrier = Surface(**{**surface.__dict__, "method": "POST"})
            answer = send(
                world, carrier, surface.path.encode(), [(header, surface.method.encode())]
            )
            attack.record(
                f"{surface.principal or 'anonymous'} POST {surface.path} {header.decode()}",
                through=surface.bypassed(world, answer),
                status=answer.status,
            )
    for surface in SURFACES:  # the oracles work: each tells when the request got in
        answer = send(world, surface, surface.path.encode(), principal=surface.owner)
        assert surface.bypassed(world, answer), f"{surface.owner} {surface.path}: {answer}"
    attack.assert_nothing_got_through()
