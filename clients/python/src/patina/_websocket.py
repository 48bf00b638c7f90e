"""A minimal WebSocket client (RFC 6455) over a socket, for terminals: the
standard library has none. Client frames are masked; messages are bounded."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import ssl
import struct
from typing import Dict, Optional, Tuple

from ._http import error_from
from .errors import PatinaConnectionError, PatinaError

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 16 << 20

TEXT, BINARY, CLOSE, PING, PONG, CONT = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0


class WebSocketClosed(PatinaError):
    """The WebSocket was closed; ``close_code`` is the peer's status (1000: normal)."""

    def __init__(self, message: str, close_code: int) -> None:
        super().__init__(message, code="closed")
        self.close_code = close_code


class WebSocket:
    """A connected WebSocket."""

    def __init__(self, sock: socket.socket, rest: bytes) -> None:
        self.sock = sock
        self._buf = bytearray(rest)
        self.closed = False

    @classmethod
    def connect(cls, scheme: str, host: str, port: int, path: str, headers: Dict[str, str],
                timeout: Optional[float]) -> "WebSocket":
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
            if scheme == "https":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        except OSError as e:
            raise PatinaConnectionError("cannot reach the patina sidecar at %s:%d: %s" % (host, port, e)) from e
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        lines = ["GET %s HTTP/1.1" % path, "Host: %s:%d" % (host, port), "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
        lines += ["%s: %s" % kv for kv in headers.items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                sock.close()
                raise PatinaConnectionError("the sidecar closed the connection during the WebSocket handshake")
            head += chunk
            if len(head) > 1 << 20:
                sock.close()
                raise PatinaError("the WebSocket handshake's answer is too long")
        head, rest = head.split(b"\r\n\r\n", 1)
        status_line, *hlines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        hdrs = {}
        for h in hlines:
            k, _, v = h.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        if status != 101:
            # An HTTP error before the upgrade: read its body.
            n = int(hdrs.get("content-length", "0") or 0)
            while len(rest) < n:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                rest += chunk
            sock.close()
            raise error_from(status, rest[:n] if n else rest)
        accept = base64.b64encode(hashlib.sha1(key.encode("ascii") + _GUID).digest()).decode("ascii")
        if hdrs.get("sec-websocket-accept") != accept:
            sock.close()
            raise PatinaError("the WebSocket handshake's answer is not for this request")
        sock.settimeout(None)
        return cls(sock, rest)

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise WebSocketClosed("the connection was cut without a close", 1006)
            self._buf += chunk
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _frame(self) -> Tuple[bool, int, bytes]:
        b0, b1 = self._read(2)
        fin, opcode, masked, n = bool(b0 & 0x80), b0 & 0x0F, bool(b1 & 0x80), b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        if n > MAX_MESSAGE:
            self.close(1009)
            raise PatinaError("a WebSocket frame of %d bytes is over the limit" % n)
        mask = self._read(4) if masked else b""
        data = self._read(n)
        if masked:
            data = _xor(data, mask)
        return fin, opcode, data

    def recv(self) -> Tuple[int, bytes]:
        """The next message: (TEXT or BINARY, its bytes). Raises
        ``WebSocketClosed`` when the peer closes."""
        kind, parts, size = None, [], 0
        while True:
            fin, opcode, data = self._frame()
            if opcode == PING:
                self._send(PONG, data)
                continue
            if opcode == PONG:
                continue
            if opcode == CLOSE:
                code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1005
                if not self.closed:
                    try:
                        self._send(CLOSE, data[:2])
                    except OSError:
                        pass
                self.closed = True
                self.sock.close()
                raise WebSocketClosed(data[2:].decode("utf-8", "replace") or "closed", code)
            if opcode in (TEXT, BINARY):
                kind = opcode
            elif opcode != CONT or kind is None:
                raise PatinaError("unexpected WebSocket frame (opcode %d)" % opcode)
            parts.append(data)
            size += len(data)
            if size > MAX_MESSAGE:
                self.close(1009)
                raise PatinaError("a WebSocket message over %d bytes" % MAX_MESSAGE)
            if fin:
                return kind, b"".join(parts)

    def _send(self, opcode: int, data: bytes) -> None:
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + _xor(data, mask))

    def send_binary(self, data: bytes) -> None:
        self._send(BINARY, data)

    def send_text(self, text: str) -> None:
        self._send(TEXT, text.encode("utf-8"))

    def close(self, code: int = 1000) -> None:
        """Closes the connection (sends a close frame first)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._send(CLOSE, struct.pack("!H", code))
        except OSError:
            pass
        self.sock.close()


def _xor(data: bytes, mask: bytes) -> bytes:
    if not data:
        return b""
    n = len(data)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
