"""Headless Chromium (Debian's `chromium` package) driven by Playwright, against a real coordinator.

Playwright never downloads a browser here: it launches `/usr/bin/chromium`, which
`scripts/test.sh` installs with apt-get when it is missing. No CJK font is needed: the
dashboard serves its own (test_cjk_font.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator, stop_all
from agent_reach.testing.waiting import wait_until

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
# `quick` re-sends a timed-out request once, so a slow agent makes a visible retry.
POLICY = """
[timeout_classes.quick]
timeout_s = 1.0
retries = 1

[delivery]
backoff_s = [0.05]
suspend_s = 30
"""

StartAgent = Callable[..., tuple[FakeAgent, ServerThread]]


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/test.sh or apt-get install -y chromium")
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def launch_chromium(playwright: Playwright) -> Callable[..., Browser]:
    """`launch_chromium(env=...)`: Debian's Chromium, headless; `env` replaces its
    environment (fontconfig's, say). The caller closes it."""

    def launch(env: dict[str, str] | None = None) -> Browser:
        return playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, env=env
        )

    return launch


@pytest.fixture(scope="session")
def browser(launch_chromium: Callable[..., Browser]) -> Iterator[Browser]:
    browser = launch_chromium()
    yield browser
    browser.close()


OPEN_CONTEXT = pytest.StashKey[BrowserContext]()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh page; the test fails if the page logs an error or opens a dialog."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    request.node.stash[OPEN_CONTEXT] = context
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    yield page
    context.close()
    assert problems == [], f"the page reported errors: {problems}"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Close the page before any fixture stops the coordinator it is polling.

    Otherwise the page's next poll meets a refused connection, which Chromium reports
    as a console error of the page.
    """
    context = item.stash.get(OPEN_CONTEXT, None)
    if context is not None:
        context.close()


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[str]:
    """A coordinator with the retrying `quick` class and 200 ms health probes."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    settings = Settings(decision_log="off", policy_file=policy, probe_interval_s=0.2)
    with run_coordinator(settings) as (url, _):
        yield url


@pytest.fixture
def http(coordinator: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=coordinator, timeout=10) as client:
        yield client


@pytest.fixture
def start_agent(http: httpx.Client) -> Iterator[StartAgent]:
    """Serve a FakeAgent and register it: `start_agent("a-1", ["echo"], status=200, weight=2)`.

    FakeAgent knobs (`status`, `delay_s`...) go to the agent, the rest to the registration.
    An agent that answers its probes is returned once a probe has found it healthy.
    """
    servers: list[ServerThread] = []
    knobs = {"status", "delay_s", "answer", "healthy"}

    def start(
        agent_id: str, capabilities: list[str], **options: object
    ) -> tuple[FakeAgent, ServerThread]:
        agent = FakeAgent(name=agent_id, **{k: v for k, v in options.items() if k in knobs})  # type: ignore[arg-type]
        server = ServerThread(agent).start()
        servers.append(server)
        registration = {k: v for k, v in options.items() if k not in knobs}
        response = http.post(
            "/v1/agents",
            json={
                "id": agent_id,
                "capabilities": capabilities,
                "transport": {"endpoint": f"{server.url}/invoke"},
                **registration,
            },
        )
        assert response.status_code == 201, response.text
        if agent.healthy:  # ready as a test means it: probed, so routing takes it as live
            wait_until(
                lambda: http.get(f"/v1/agents/{agent_id}").json()["status"] == "healthy",
                f"{agent_id}'s first probe",
            )
        return agent, server

    yield start
    stop_all(servers)


@pytest.fixture
def screenshots() -> Path:
    """test-artifacts/screenshots/, where the tests keep what the pages showed."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@pytest.fixture
def screenshot(page: Page, screenshots: Path) -> Callable[[str], None]:
    """`screenshot("trace")` keeps what the page shows now under test-artifacts/screenshots/."""

    def save(name: str) -> None:
        page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)

    return save
