"""The dashboard on a secured coordinator: the key prompt says how else to pass a key."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect
from pydantic import SecretStr

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator

ADMIN_KEY = "dashboard-admin-key-0123456789"


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page that may see 401 answers (the prompt is about them), nothing else."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    yield page
    context.close()
    assert [p for p in problems if "401 (Unauthorized)" not in p] == []


@pytest.fixture
def secured() -> Iterator[str]:
    settings = Settings(decision_log="off", auth="on", admin_key=SecretStr(ADMIN_KEY))
    with run_coordinator(settings) as (url, _):
        yield url


def test_the_key_prompt_hints_how_to_pass_a_key(page: Page, secured: str) -> None:
    page.goto(f"{secured}/ui/")

    form = page.locator("form.key-form")
    expect(form).to_be_visible()
    expect(form).to_contain_text("/ui/#key=")
    expect(form).to_contain_text("/ui/#/traffic?key=")
    expect(form).to_contain_text("--role observer")


def test_a_key_in_the_fragment_opens_the_dashboard_and_leaves_the_address_bar(
    page: Page, secured: str
) -> None:
    page.goto(f"{secured}/ui/#key={ADMIN_KEY}")

    expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
    expect(page.locator("form.key-form")).to_have_count(0)
    assert ADMIN_KEY not in page.url


def test_a_key_in_the_fragment_opens_the_view_it_names(page: Page, secured: str) -> None:
    page.goto(f"{secured}/ui/#/traffic?by=instance&key={ADMIN_KEY}")

    expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
    expect(page.locator('#nav a[data-view="traffic"]')).to_have_class(re.compile(r"\bactive\b"))
    expect(page.locator('.switch a[data-by="instance"]')).to_have_class(re.compile(r"\bactive\b"))
    assert ADMIN_KEY not in page.url
    assert page.url.endswith("/ui/#/traffic?by=instance")

    page.goto(f"{secured}/ui/#/decisions")  # the key stays for the tab: no prompt
    expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
    expect(page.locator("form.key-form")).to_have_count(0)
