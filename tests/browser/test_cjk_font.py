"""Chinese is legible on a machine with no CJK font: the dashboard brings its own.

Chromium is launched with a fontconfig configuration that knows one Latin font only
(`FONTCONFIG_FILE`), as on a server or in a container without `fonts-noto-cjk`. Two
names of four characters each are drawn in the registry, and Chromium's DevTools say
which font drew each glyph: the bundled one, whereas the control, with the bundled
font's files refused, is drawn by DejaVu Sans (boxes: it has no Chinese glyph).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

FONT_FILES = "**/ui/vendor/noto-sans-sc/files/*"
NAMES = {"shop-1": "商品助手", "refund-1": "退款查询"}  # four characters each, none shared


def _fontconfig_without_cjk(folder: Path) -> dict[str, str]:
    """A fontconfig configuration whose only font is DejaVu Sans (the environment to pass)."""
    fc_match = shutil.which("fc-match")
    if fc_match is None:
        pytest.fail("fc-match is missing: apt-get install -y fontconfig")
    latin = subprocess.run(
        [fc_match, "-f", "%{file}", "DejaVu Sans"], capture_output=True, text=True, check=True
    ).stdout
    fonts = folder / "fonts"
    fonts.mkdir()
    (fonts / Path(latin).name).symlink_to(latin)
    config = folder / "fonts.conf"
    config.write_text(
        f"<?xml version='1.0'?>\n<fontconfig><dir>{fonts}</dir>"
        f"<cachedir>{folder / 'cache'}</cachedir></fontconfig>\n",
        encoding="utf-8",
    )
    env = {**os.environ, "FONTCONFIG_FILE": str(config)}
    chinese = subprocess.run(
        ["fc-list", ":lang=zh", "family"], capture_output=True, text=True, env=env, check=True
    )
    assert chinese.stdout.strip() == "", "the configuration still finds a CJK font"
    return env


@pytest.fixture(scope="module")
def bare_browser(
    launch_chromium: Callable[..., Browser], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Browser]:
    """Chromium that sees DejaVu Sans and nothing else."""
    browser = launch_chromium(_fontconfig_without_cjk(tmp_path_factory.mktemp("fontconfig")))
    yield browser
    browser.close()


def _fonts_drawing_the_names(
    browser: Browser, coordinator: str, *, refuse_font: bool
) -> list[list[dict[str, Any]]]:
    """For each name cell, the fonts Chromium drew its characters with and how many glyphs
    each drew (DevTools' `CSS.getPlatformFontsForNode`), once every font asked for loaded."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page: Page = context.new_page()
    if refuse_font:
        page.route(FONT_FILES, lambda route: route.fulfill(status=404))
    page.goto(f"{coordinator}/ui/#/registry")
    expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
    for agent, name in NAMES.items():
        expect(page.locator(f'#registry tr[data-agent="{agent}"] .name')).to_have_text(name)
    page.evaluate("document.fonts.ready")
    devtools = context.new_cdp_session(page)
    devtools.send("DOM.enable")
    devtools.send("CSS.enable")
    root = devtools.send("DOM.getDocument")["root"]["nodeId"]
    drawn = []
    for agent in NAMES:
        cell = devtools.send(
            "DOM.querySelector",
            {"nodeId": root, "selector": f'#registry tr[data-agent="{agent}"] .name'},
        )["nodeId"]
        drawn.append(devtools.send("CSS.getPlatformFontsForNode", {"nodeId": cell})["fonts"])
    context.close()
    return drawn


def test_chinese_names_are_drawn_with_the_bundled_font_when_the_machine_has_none(
    bare_browser: Browser, coordinator: str, start_agent
) -> None:
    for agent, name in NAMES.items():
        start_agent(agent, ["echo"], display_name=name)

    bundled = _fonts_drawing_the_names(bare_browser, coordinator, refuse_font=False)
    control = _fonts_drawing_the_names(bare_browser, coordinator, refuse_font=True)

    # the control: without the bundled font, only DejaVu Sans (its "no glyph" box) is left
    assert all(f["familyName"] == "DejaVu Sans" for fonts in control for f in fonts), control
    for fonts in bundled:  # every glyph by the bundled font (its variable instance's name)
        assert [
            (f["familyName"].startswith("Noto Sans SC"), f["isCustomFont"], f["glyphCount"])
            for f in fonts
        ] == [(True, True, 4)], fonts


def test_the_font_slices_are_served_under_the_dashboards_policy(coordinator: str, http) -> None:
    css = http.get("/ui/vendor/noto-sans-sc/noto-sans-sc.css")
    assert css.status_code == 200
    slice_url = re.search(r"url\(\./(files/[^)]+\.woff2)\)", css.text)
    assert slice_url is not None
    font = http.get(f"/ui/vendor/noto-sans-sc/{slice_url.group(1)}")
    assert font.status_code == 200
    assert font.headers["content-type"] == "font/woff2"
    assert font.content[:4] == b"wOF2"
    assert "default-src 'self'" in font.headers["content-security-policy"]


def test_a_page_that_shows_no_chinese_fetches_no_chinese_slice(
    bare_browser: Browser, coordinator: str, start_agent
) -> None:
    start_agent("plain-1", ["echo"], display_name="plain")
    context = bare_browser.new_context()
    page = context.new_page()
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if r.url.endswith(".woff2") else None)
    page.goto(f"{coordinator}/ui/#/registry")
    expect(page.locator('#registry tr[data-agent="plain-1"]')).to_be_visible()
    page.evaluate("document.fonts.ready")
    context.close()
    # the numbered slices hold the Chinese characters (latin, cyrillic... are named)
    assert [url for url in fetched if re.search(r"noto-sans-sc-\d+-400", url)] == []
