"""The API's values as dataclasses. Each keeps the answer it was read from
in ``raw`` (fields a newer sidecar adds are there too). Times are the
API's RFC 3339 strings."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Type, TypeVar

T = TypeVar("T")


def from_dict(cls: Type[T], d: Dict[str, Any], **nested: Any) -> T:
    """Builds cls from an answer, ignoring fields it does not know."""
    names = set(getattr(cls, "__dataclass_fields__", {}))
    kw = {k: v for k, v in d.items() if k in names and k != "raw"}
    kw.update(nested)
    obj = cls(**kw)
    object.__setattr__(obj, "raw", d)
    return obj


def _bytes(text: str, b64: str) -> bytes:
    return base64.b64decode(b64) if b64 else text.encode("utf-8")


@dataclass
class AgentStatus:
    """A workspace's agent: the process in its container that runs its sessions."""

    connected: bool = False
    pid: Optional[int] = None
    version: str = ""
    started_at: Optional[str] = None
    restarts: int = 0
    last_restart: Optional[str] = None
    last_restart_reason: str = ""
    error: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class PortForward:
    """A workspace port reachable on the sidecar's host: connect to ``address``
    (``host:port``) or ``url``; any TCP protocol passes through."""

    port: int = 0
    address: str = ""
    url: str = ""
    connections: int = 0
    created_at: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "PortForward":
        return from_dict(cls, d)


@dataclass
class SessionInfo:
    """A session: a persistent bash shell. ``status`` is idle, running, ended
    (with ``exit_code`` and ``end_reason``) or closed."""

    id: str = ""
    cwd: str = ""
    status: str = ""
    created_at: str = ""
    running: str = ""
    commands: int = 0
    exit_code: Optional[int] = None
    end_reason: str = ""
    replacements: int = 0
    terminal: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "SessionInfo":
        return from_dict(cls, d)


@dataclass
class ExecResult:
    """The outcome of a command.

    ``stdout``/``stderr`` are text (invalid UTF-8 replaced); ``stdout_data``/
    ``stderr_data`` are the exact bytes. Output over 1 MiB per stream is
    truncated: the head is here, ``stdout_tail`` holds the last MiB,
    ``stdout_truncated`` is set and ``stdout_bytes`` is the full size (read
    the rest with ``session.command(result.command_id).read(offset=...)``).
    ``exit_code`` is 128+N when signal N ended it (130 after a timeout), -1
    when the shell could not report it (its disk full, say).
    ``session_ended``: the command ended the shell (``exit 3``).
    """

    command_id: str = ""
    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    stdout_base64: str = ""
    stderr_base64: str = ""
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_tail_base64: str = ""
    stderr_tail_base64: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    interrupted: bool = False
    session_ended: bool = False
    shell_replaced: bool = False
    resumed: bool = False
    notice: str = ""
    cwd: str = ""
    duration_ms: float = 0.0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "ExecResult":
        return from_dict(cls, d)

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_code == 0

    @property
    def stdout_data(self) -> bytes:
        """stdout's exact bytes (the head, when truncated)."""
        return _bytes(self.stdout, self.stdout_base64)

    @property
    def stderr_data(self) -> bytes:
        """stderr's exact bytes (the head, when truncated)."""
        return _bytes(self.stderr, self.stderr_base64)


@dataclass
class CommandInfo:
    """A command's history record. ``state`` is running, finished or lost."""

    id: str = ""
    command: str = ""
    state: str = ""
    started_at: str = ""
    ended_at: Optional[str] = None
    exit_code: Optional[int] = None
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    timed_out: bool = False
    interrupted: bool = False
    session_ended: bool = False
    shell_replaced: bool = False
    output_pruned: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "CommandInfo":
        return from_dict(cls, d)


@dataclass
class OutputChunk:
    """A piece of a streamed command's output: ``stream`` is "stdout" or
    "stderr", ``data`` its bytes, ``offset`` where they start in it."""

    stream: str
    data: bytes
    offset: int

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


@dataclass
class FileInfo:
    """One entry of a directory listing; ``type`` is file, dir, symlink or other."""

    name: str = ""
    type: str = ""
    size: int = 0
    mode: str = ""
    mod_time: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "FileInfo":
        return from_dict(cls, d)


@dataclass
class FileStat:
    """One changed file; ``status`` is added, modified, deleted, renamed, copied or typechange."""

    path: str = ""
    old_path: str = ""
    status: str = ""
    added: int = 0
    deleted: int = 0
    binary: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "FileStat":
        return from_dict(cls, d)


@dataclass
class Diff:
    """The workspace's changes against its base: ``text`` (unified diff) and
    ``files``. ``commit`` is what it shows; a merge naming no commit takes
    exactly it. ``uncommitted``: part of it is not committed (commit first)."""

    base: str = ""
    commit: str = ""
    text: str = ""
    files: List[FileStat] = field(default_factory=list)
    truncated: bool = False
    files_truncated: bool = False
    uncommitted: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "Diff":
        return from_dict(cls, d, files=[FileStat.from_api(f) for f in d.get("files") or []])


@dataclass
class CommitResult:
    """What a commit did: ``committed`` is False when there was nothing to
    commit; ``reviewed``: it records exactly what the last diff showed."""

    commit: str = ""
    committed: bool = False
    reviewed: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "CommitResult":
        return from_dict(cls, d)


@dataclass
class MergeResult:
    """What a merge did: ``merged`` is the workspace's commit that was merged
    into ``into`` (which was at ``previous`` and is at ``commit`` now)."""

    into: str = ""
    previous: str = ""
    commit: str = ""
    merged: str = ""
    fast_forward: bool = False
    up_to_date: bool = False
    uncommitted: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "MergeResult":
        return from_dict(cls, d)


@dataclass
class ApplyResult:
    """What apply staged in your working tree ``dir``."""

    dir: str = ""
    files: List[FileStat] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "ApplyResult":
        return from_dict(cls, d, files=[FileStat.from_api(f) for f in d.get("files") or []])


@dataclass
class LogEntry:
    """One event of a workspace's log (created, command, committed, merged...)."""

    time: str = ""
    kind: str = ""
    exit_code: Optional[int] = None
    message: str = ""
    line: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, d: Dict[str, Any]) -> "LogEntry":
        return from_dict(cls, d)
