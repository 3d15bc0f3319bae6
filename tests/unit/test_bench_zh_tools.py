"""bench/zh_tools.py reads HammerBench's own sample files and the two-file extract alike,
takes the user's words after any external knowledge, keeps only requests whose tool is in
the catalog, and registers each tool as a description-only skill with its schema."""

from __future__ import annotations

import json
from pathlib import Path

BENCH = Path(__file__).parents[2] / "bench" / "zh_tools.py"
PARCEL = {
    "name": "OnlineShopping.ExpressDelivery.searchExpress",
    "description": "根据指定快递单号、收件人、地址等信息搜索快递物流",
    "parameters": {
        "type": "object",
        "properties": {
            "express_id": {"type": "string", "description": "快递单号"},
            "weight": {"type": "float", "description": "重量"},
        },
        "required": ["express_id"],
    },
}
SONG = {"name": "MusicRadio.OnlineMusic.playSong", "description": "播放歌曲", "parameters": {}}


def _sample(user: str, tool: str, offered: list[dict[str, object]]) -> dict[str, object]:
    return {
        "messages": [
            {"role": "user", "content": user},
            {"role": "function call", "content": {"name": tool, "arguments": {}}},
            {"role": "assistant", "content": "请提供快递单号"},
        ],
        "multiple_tools": offered,
    }


def test_samples_and_the_extract_make_one_catalog_and_its_requests(bench, tmp_path):
    root = tmp_path / "hammerbench"
    (root / "multi-turn").mkdir(parents=True)
    samples = [
        _sample("我的快递到哪了", PARCEL["name"], [PARCEL, SONG]),
        _sample("EK:张三发来短信：单号SF123。\nquery:查一下短信里那个快递", PARCEL["name"], [SONG]),
        _sample("帮我订机票", "Navigation.FlightTickets.bookFlight", [SONG]),  # not offered
    ]
    (root / "multi-turn" / "sQmA.json").write_text(json.dumps(samples), encoding="utf-8")
    extra = {"name": "UtilityTools.Weather.getWeather", "description": "查询天气"}
    (root / "tools.json").write_text(json.dumps([extra]), encoding="utf-8")
    asked = [{"query": "明天下雨吗", "tool": extra["name"]}, {"query": "放首歌", "tool": "x.y.z"}]
    (root / "requests.json").write_text(json.dumps(asked), encoding="utf-8")

    tools, requests = bench.load(root)

    assert sorted(tools) == sorted([PARCEL["name"], SONG["name"], extra["name"]])
    assert [(r.query, r.tool) for r in requests] == [
        ("我的快递到哪了", PARCEL["name"]),
        ("查一下短信里那个快递", PARCEL["name"]),
        ("明天下雨吗", extra["name"]),
    ]


def test_a_tool_is_a_description_only_skill_of_its_app_s_agent(bench):
    tool = bench.Tool(PARCEL["name"], PARCEL["description"], PARCEL["parameters"])
    song = bench.Tool(SONG["name"], SONG["description"], SONG["parameters"])

    index = bench.catalog_index([tool, song])

    tag = "onlineshopping.expressdelivery.searchexpress"
    (instance,) = index.instances_of(tag)
    assert instance.spec.id == "onlineshopping-expressdelivery"
    (skill,) = instance.spec.skills
    assert (skill.capability, skill.description, skill.examples) == (tag, PARCEL["description"], [])
    properties = skill.input_schema["properties"]
    assert properties["weight"] == {"type": "number", "description": "重量"}  # float: number
    (player,) = index.instances_of("musicradio.onlinemusic.playsong")
    assert player.spec.skills[0].input_schema is None  # no properties: no schema


def test_the_split_halves_requests_by_their_text_as_metatool_s_are(bench, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH.parent))
    import tool_catalogs

    requests = [bench.Request(f"请求{i}", SONG["name"]) for i in range(40)]

    dev, test = bench.of_split(requests, "dev"), bench.of_split(requests, "test")

    assert bench.of_split(requests, "all") == requests
    assert sorted(dev + test, key=requests.index) == requests  # halves, disjoint
    assert dev and test
    assert all(tool_catalogs.in_split(r.query, "dev") for r in dev)
    assert bench.of_split([bench.Request(r.query, PARCEL["name"]) for r in dev], "dev") == [
        bench.Request(r.query, PARCEL["name"]) for r in dev
    ]  # by the text alone
