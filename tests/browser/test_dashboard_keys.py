"""The dashboard on a secured coordinator: it asks for an observer (or admin) key and
says why when a caller's key is given (issue 16)."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Browser, expect

from agent_reach.config import Settings
from agent_reach.testing.servers import run_coordinator

ADMIN_KEY = "dash-" + "k" * 40


def _mint(url: str, principal: str, role: str) -> str:
    answer = httpx.post(
        f"{url}/v1/keys",
        json={"principal": principal, "role": role},
        headers={"authorization": f"Bearer {ADMIN_KEY}"},
    )
    assert answer.status_code == 201, answer.text
    key: str = answer.json()["key"]
    return key


def test_the_dashboard_asks_for_an_observer_key_and_says_why_a_caller_key_is_not_enough(
    browser: Browser,
) -> None:
    settings = Settings(auth="on", admin_key=ADMIN_KEY, decision_log="off")
    with run_coordinator(settings) as (url, _):
        caller, observer = _mint(url, "cs-bot", "caller"), _mint(url, "ops", "observer")
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        uncaught: list[str] = []  # the 401 before a key is given is logged by the browser
        page.on("pageerror", lambda e: uncaught.append(str(e)))
        page.goto(f"{url}/ui/#/decisions")
        form = page.locator("form.key-form")
        expect(form).to_contain_text("needs an observer or admin API key")
        expect(form).to_contain_text("agent-reach keys create --principal ops --role observer")

        form.locator("input").fill(caller)
        form.locator("button").click()
        expect(form).to_contain_text("This key is cs-bot's, a caller key")
        expect(form).to_contain_text("needs an observer or admin key")
        expect(page.locator("#connection")).to_have_text("needs an observer key")

        form.locator("input").fill(observer)
        form.locator("button").click()
        expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
        expect(page.locator("form.key-form")).to_have_count(0)
        context.close()
        assert uncaught == []


def test_with_a_caller_key_the_registry_shows_only_the_warning(browser: Browser) -> None:
    settings = Settings(auth="on", admin_key=ADMIN_KEY, decision_log="off")
    with run_coordinator(settings) as (url, _):
        caller = _mint(url, "cs-bot", "caller")
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.goto(f"{url}/ui/#/registry?key={caller}")
        expect(page.locator("form.key-form")).to_contain_text("This key is cs-bot's")
        # the registry read nothing: no "no instance matches" under the warning
        expect(page.get_by_text("No instance matches")).to_be_hidden()
        expect(page.locator("#registry")).to_be_hidden()

        observer = _mint(url, "ops", "observer")
        page.locator("form.key-form input").fill(observer)
        page.locator("form.key-form button").click()
        expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
        expect(page.get_by_text("No instance matches")).to_be_visible()  # now it is true
        context.close()
