"""Interactive terminals over the sidecar's WebSocket."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Union

from ._websocket import BINARY, WebSocket, WebSocketClosed
from .errors import PatinaError

if TYPE_CHECKING:
    from ._http import Transport


@dataclass
class TerminalEvent:
    """Output of the terminal (``output``), or its end (``exit``: a dict
    with ``exit_code`` and maybe ``reason``)."""

    output: bytes = b""
    exit: Optional[Dict[str, Any]] = None


class Terminal:
    """An interactive terminal in a session (vim, a REPL, Ctrl-C, resizes).

    ``hello`` is the server's first message (``offset``: where the output
    that follows starts, ``started``, ``resumed``). Read with ``recv()`` or
    by iterating (output bytes until the terminal exits: then
    ``exit_code``); type with ``write()``; ``resize()``; ``end()`` hangs it
    up (its shell hands its state back to the session); ``close()``
    detaches, leaving it running for 60 s, to reconnect with
    ``session.terminal(offset=hello offset + bytes received)``.
    """

    def __init__(self, ws: WebSocket, hello: Dict[str, Any]) -> None:
        self._ws = ws
        self.hello = hello
        self.exit_code: Optional[int] = None
        self.received = 0

    @classmethod
    def open(cls, t: "Transport", path: str, query: Dict[str, Any]) -> "Terminal":
        url = t.prefix + path + "?" + urllib.parse.urlencode(query)
        headers = {k: v for k, v in t.headers().items()}
        ws = WebSocket.connect(t.scheme, t.host, t.port, url, headers, t.timeout)
        kind, data = ws.recv()
        hello = json.loads(data) if kind != BINARY else {}
        if hello.get("type") != "hello":
            ws.close()
            raise PatinaError("the terminal sent no hello")
        return cls(ws, hello)

    @property
    def offset(self) -> int:
        """The offset to reconnect at: the hello's plus the bytes received."""
        return int(self.hello.get("offset", 0)) + self.received

    def recv(self) -> TerminalEvent:
        """The next output, or the exit; ``EOFError`` after the exit."""
        try:
            kind, data = self._ws.recv()
        except WebSocketClosed as e:
            if e.close_code == 1000:
                raise EOFError("the terminal has ended") from None
            raise
        if kind == BINARY:
            self.received += len(data)
            return TerminalEvent(output=data)
        msg = json.loads(data)
        if msg.get("type") != "exit":
            raise PatinaError("unexpected terminal message %r" % data[:100])
        self.exit_code = msg.get("exit_code")
        return TerminalEvent(exit=msg)

    def __iter__(self) -> Iterator[bytes]:
        """Output bytes until the terminal exits (``exit_code`` is then set)."""
        while True:
            try:
                ev = self.recv()
            except EOFError:
                return
            if ev.exit is not None:
                return
            yield ev.output

    def read_until(self, needle: Union[bytes, str], limit: int = 1 << 20) -> bytes:
        """Reads output until it holds ``needle``; returns all of it."""
        want = needle.encode("utf-8") if isinstance(needle, str) else needle
        buf = b""
        for out in self:
            buf += out
            if want in buf or len(buf) > limit:
                return buf
        return buf

    def write(self, data: Union[bytes, str]) -> None:
        """Types ``data`` (``"ls\\r"``: Enter is a carriage return)."""
        self._ws.send_binary(data.encode("utf-8") if isinstance(data, str) else bytes(data))

    def resize(self, rows: int, cols: int) -> None:
        """Sets the terminal's size."""
        self._ws.send_text(json.dumps({"type": "resize", "rows": rows, "cols": cols}))

    def end(self) -> None:
        """Hangs the terminal up; the rest of its output and its exit follow."""
        self._ws.send_text(json.dumps({"type": "end"}))

    def close(self) -> None:
        """Detaches (the terminal stays for a reconnect within 60 s)."""
        self._ws.close(1001)

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
