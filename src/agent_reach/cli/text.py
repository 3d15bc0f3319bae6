"""Text that wraps between words but never inside what belongs together.

Rich wraps at any whitespace, a no-break space included, so at 80 columns it printed
`trace ⏎ 1484dc…` and `+0.24 ⏎ ms`. `kept` joins an id to its label, a number to its
unit and a comparison's operands with no-break spaces, and `Kept` wraps only at the
other spaces, prints the joins as plain spaces and leaves no space at a line's end.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.containers import Lines
from rich.measure import Measurement
from rich.segment import Segment, Segments
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import (
        Console,
        ConsoleOptions,
        JustifyMethod,
        OverflowMethod,
        RenderableType,
    )

JOIN = "\u00a0"  # a no-break space: where a line must not break
_JOINED = [
    re.compile(r"(?<=\d) (?=(?:ms|s|B|%|kB|MB)\b)"),  # a number and its unit
    re.compile(r" (?=[<≥=×÷→] )|(?<= [<≥=×÷→]) "),  # an operator and its operands
    # a label and its value, an id or a number (a word with a digit in it)
    re.compile(
        r"\b((?:trace|request|task|score|confidence|gap|policy|attempt|lease|HTTP|Errno)) "
        r"(?=[^\s]*\d)"
    ),
]
_BREAK = re.compile(r"[^ \n]+ *")  # words: only a plain space separates them


def kept(content: str, style: str = "") -> Kept:
    """`content` with its ids, numbers and units held to what they belong to."""
    for pattern in _JOINED:
        content = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + JOIN, content)
    return Kept(content, style=style)


class Kept(Text):
    """A `Text` that breaks lines only at plain spaces (never at `JOIN`), prints `JOIN`
    as a space, and strips the spaces a break leaves at a line's end."""

    def wrap(
        self,
        console: Console,
        width: int,
        *,
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        tab_size: int = 8,
        no_wrap: bool | None = None,
    ) -> Lines:
        lines = Lines()
        for paragraph in self.split(allow_blank=True):
            for line in paragraph.divide(_breaks(paragraph.plain, width)):
                line.rstrip()
                line.plain = line.plain.replace(JOIN, " ")
                lines.append(line)
        return lines

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        """As wide as its longest unbreakable run at least, its longest line at most."""
        words = self.plain.replace("\n", " ").split(" ")
        longest = max((cell_len(word) for word in words), default=0)
        widest = max((cell_len(line) for line in self.plain.splitlines()), default=0)
        return Measurement(min(longest, options.max_width), min(widest, options.max_width))


def show(console: Console, renderable: RenderableType) -> None:
    """Print `renderable` with no space at any line's end (Rich pads table cells and
    padded blocks to their width)."""
    segments: list[Segment] = []
    for line in console.render_lines(renderable, pad=False):
        segments.extend(_rstripped(line))
        segments.append(Segment.line())
    console.print(Segments(segments), end="", soft_wrap=True)


def _rstripped(line: list[Segment]) -> list[Segment]:
    kept_segments = list(line)
    while kept_segments and not kept_segments[-1].control:
        last = kept_segments[-1]
        text = last.text.rstrip(" ")
        if text:
            kept_segments[-1] = Segment(text, last.style)
            break
        kept_segments.pop()
    return kept_segments


def _breaks(plain: str, width: int) -> list[int]:
    """Where to break `plain` (offsets) so each line fits `width` cells: before the word
    that would pass it; a word longer than a line is cut where the line ends."""
    offsets: list[int] = []
    start = 0  # where the current line starts
    for word in _BREAK.finditer(plain):
        begin = word.start()
        stop = begin + len(word.group().rstrip(" "))
        if begin > start and cell_len(plain[start:stop]) > width:
            offsets.append(begin)
            start = begin
        while cell_len(plain[start:stop]) > width:  # a word longer than a line
            start += max(1, width)
            offsets.append(start)
    return offsets
