"""Numbers written in text, each with the unit it is written with, and the unit a
property's name carries: what `params.py` fills number and integer properties from.

A number is written in digits (ASCII or full-width), with `,` thousands groups
(`1,200`), a decimal part (`2.5`) and a leading minus (`-5`, `−5`) allowed. Digits that
belong to something else are no number: part of an identifier (`ORD-1234`, `A4`, `2nd`,
`5G`), a range, date or time (`3-5`, `2026-12-06`, `10:30`, `12/06`), a version
(`2.5.1`) or a list without spaces (`1,2`). Its unit is a known one written right after
it (`3 kg`, `3kg`, `2.5公斤`, `40%`) or, for a currency sign, right before it (`$30`,
`¥30`); `UNITS` lists them. A property's unit is the last part of its name
(`weight_kg`, `priceUsd`, `timeout-s`) when that part is a known unit and the name has
more than one part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# canonical unit -> how it is written; ASCII aliases match case-insensitively, except
# one-letter ones (`5G` is no weight; `3L` is written for litres, so `L` is listed).
# Left out on purpose: aliases that more often mean something else beside a number
# (`日` a date, `分` minutes/points/cents, `块` pieces as often as yuan).
UNITS: dict[str, tuple[str, ...]] = {
    "kg": ("kg", "kgs", "kilo", "kilos", "kilogram", "kilograms", "公斤", "千克"),
    "g": ("g", "gram", "grams", "克"),
    "lb": ("lb", "lbs", "pound", "pounds", "磅"),
    "km": ("km", "kilometer", "kilometers", "kilometre", "kilometres", "公里", "千米"),
    "m": ("m", "meter", "meters", "metre", "metres", "米"),
    "cm": ("cm", "centimeter", "centimeters", "厘米", "公分"),
    "mm": ("mm", "millimeter", "millimeters", "毫米"),
    "l": ("l", "L", "liter", "liters", "litre", "litres", "升"),
    "ml": ("ml", "mL", "milliliter", "milliliters", "毫升"),
    "s": ("s", "sec", "secs", "second", "seconds", "秒"),
    "min": ("min", "mins", "minute", "minutes", "分钟"),
    "h": ("h", "hr", "hrs", "hour", "hours", "小时", "个小时"),
    "days": ("day", "days", "天"),
    "pct": ("%", "％", "percent", "pct"),
    "usd": ("usd", "dollar", "dollars", "美元", "$"),
    "eur": ("eur", "euro", "euros", "欧元", "€"),
    "gbp": ("gbp", "£", "英镑"),
    "cny": ("cny", "rmb", "yuan", "元", "块钱", "人民币", "¥", "￥"),
}
PREFIX_SIGNS = {"$": "usd", "€": "eur", "£": "gbp", "¥": "cny", "￥": "cny"}

_FULL_WIDTH_DIGITS = str.maketrans("０１２３４５６７８９", "0123456789")
_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.,:/\-−])"  # not inside an identifier, a date, a list or a range
    r"(?P<sign>[-−])?(?P<whole>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.(?P<part>[0-9]+))?"
    r"(?![0-9]|[.,:/\-−][0-9])"
)
_LETTERS = re.compile(r"[A-Za-z]+")
_NAME_PARTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_ALIASES = sorted(
    ((alias, unit) for unit, aliases in UNITS.items() for alias in aliases),
    key=lambda pair: -len(pair[0]),
)
_ASCII_UNITS = {  # the ASCII word (folded, unless one letter) -> unit
    (alias if len(alias) == 1 else alias.lower()): unit
    for alias, unit in _ALIASES
    if alias.isascii() and alias.isalpha()
}
_MARKS = [(alias, unit) for alias, unit in _ALIASES if not (alias.isascii() and alias.isalpha())]
_NAME_UNITS = {alias.lower(): unit for alias, unit in _ALIASES if alias.isascii()}


@dataclass(frozen=True, slots=True)
class Quantity:
    """A number in the text: its value (an int when written without a decimal part),
    the unit written with it (canonical, or None), and where it stands."""

    value: int | float
    unit: str | None
    start: int
    end: int


def quantities(text: str) -> list[Quantity]:
    """Every number in `text`, in order (see the module doc for what counts)."""
    said = text.translate(_FULL_WIDTH_DIGITS)
    found = []
    for match in _NUMBER.finditer(said):
        after = said[match.end() :]
        glued = _LETTERS.match(after)
        unit = _unit_after(after.lstrip(" \t") if not glued else after)
        if glued and unit is None:
            continue  # `2nd`, `5G`, `3x`: letters glued to digits make a word
        unit = unit or _sign_before(said[: match.start()])
        whole = int(match["whole"].replace(",", ""))
        value: int | float = float(f"{whole}.{match['part']}") if match["part"] else whole
        found.append(Quantity(-value if match["sign"] else value, unit, *match.span()))
    return found


def unit_of_name(name: str) -> str | None:
    """The unit a property's name ends with (`weight_kg` -> `kg`), or None."""
    parts = [p.lower() for p in _NAME_PARTS.findall(name)]
    if len(parts) < 2:
        return None
    return _NAME_UNITS.get(parts[-1])


def _unit_after(text: str) -> str | None:
    word = _LETTERS.match(text)
    if word:  # a whole ASCII word: `kg`, `kilograms`, not the `g` of `gifts`
        letters = word.group(0)
        return _ASCII_UNITS.get(letters if len(letters) == 1 else letters.lower())
    for alias, unit in _MARKS:  # signs and CJK units: no word boundary to wait for
        if text.startswith(alias):
            return unit
    return None


def _sign_before(text: str) -> str | None:
    stripped = text.rstrip(" \t")
    return PREFIX_SIGNS.get(stripped[-1:]) if stripped else None
