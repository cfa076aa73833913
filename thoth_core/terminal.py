"""What a terminal frontend shows: text with every escape sequence and control character taken out.

A model can be steered to write escape sequences (set the window title, hide text, rewrite the
clipboard with OSC 52, move the cursor over earlier lines), and remembered text can hold them
too. `printable` removes ECMA-48 sequences whole (CSI, OSC, DCS, SOS, PM, APC, and the other
escapes, in their 7-bit `ESC x` and 8-bit C1 forms) and then every other C0 and C1 control and
DEL; newlines and tabs stay, a CRLF becomes a newline, a lone surrogate (bytes that were not
UTF-8) becomes U+FFFD. A string sequence that is not terminated ends at the next newline.

`Printable` does the same for a stream of pieces (a streamed reply): a sequence cut between two
pieces is held back until the next piece completes it, so it is removed whole rather than leaving
its tail on screen. `PrintableStream` wraps a text stream (the CLI's standard output) with one,
`PrintableFormatter` a log formatter (the CLI's log lines on standard error).
"""

from __future__ import annotations

import logging
import re
from typing import Any, TextIO

# ESC [ or CSI, parameter bytes, intermediate bytes, a final byte
_CSI = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
# OSC, DCS, SOS, PM, APC: a payload up to BEL or ST (ESC \ or 0x9c), else up to the end of the line
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
# any other escape: ESC, intermediate bytes, a final byte (ESC ( B, ESC 7, ESC c, ...)
_ESCAPE = r"\x1b[\x20-\x2f]*[\x30-\x7e]?"
SEQUENCE = re.compile(f"{_CSI}|{_STRING}|{_ESCAPE}")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but tab and newline, DEL, C1
SURROGATE = re.compile(r"[\ud800-\udfff]")
# the start of a sequence (or a CR) a later piece may complete, at the very end of a piece
_UNFINISHED = re.compile(
    r"(?:(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*\x1b?"
    r"|\x1b[\x20-\x2f]*|\r)\Z"
)
HOLD_CHARS = 4096  # a sequence left open longer than this is removed as it is (its tail may show as text)


def printable(text: str) -> str:
    """text without escape sequences or control characters (newlines and tabs kept), safe to show on a terminal."""
    text = SEQUENCE.sub("", text.replace("\r\n", "\n"))
    return SURROGATE.sub("\ufffd", CONTROL.sub("", text))


class Printable:
    """`printable` for text that comes in pieces: a sequence split between pieces is removed whole."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        """The printable part of what has come so far that was not returned yet."""
        text = self._held + piece
        unfinished = _UNFINISHED.search(text)
        cut = unfinished.start() if unfinished and len(text) - unfinished.start() <= HOLD_CHARS else len(text)
        self._held = text[cut:]
        return printable(text[:cut])

    def end(self) -> str:
        """What is held at the end (an unfinished sequence is dropped; a lone CR is nothing)."""
        held, self._held = self._held, ""
        return printable(held)


class PrintableStream:
    """A text stream that writes only printable text to the stream it wraps (see `Printable`)."""

    def __init__(self, stream: TextIO) -> None:
        self.wrapped = stream
        self._printable = Printable()

    def write(self, text: str) -> int:
        """Write text's printable part; returns len(text), as if all of it was written."""
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        shown = self._printable.feed(text)
        if shown:
            self.wrapped.write(shown)
        return len(text)

    def writelines(self, lines: Any) -> None:
        """Write each line."""
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)  # flush, isatty, encoding, fileno, ...


class PrintableFormatter(logging.Formatter):
    """A log formatter whose lines are printable (log lines quote exceptions, which may quote the model)."""

    def __init__(self, inner: logging.Formatter | None = None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        """The inner formatter's line, made printable."""
        return printable(self.inner.format(record))


def guard(stream: TextIO) -> TextIO:
    """stream wrapped in a `PrintableStream` (once)."""
    return stream if isinstance(stream, PrintableStream) else PrintableStream(stream)  # type: ignore[return-value]


__all__ = ["Printable", "PrintableFormatter", "PrintableStream", "guard", "printable"]
