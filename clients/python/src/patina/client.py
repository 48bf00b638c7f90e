"""The synchronous client: ``Client`` → ``Workspace`` → ``Session`` → ``Command``."""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import _config
from ._http import Transport, quote, quote_path
from .errors import ConflictError, InvalidError, NotFoundError, PatinaError
from .terminal import Terminal
from .types import (
    AgentStatus,
    ApplyResult,
    CommandInfo,
    CommitResult,
    Diff,
    ExecResult,
    FileInfo,
    LogEntry,
    MergeResult,
    OutputChunk,
    PortForward,
    SessionInfo,
    from_dict,
)

Bytesish = Union[bytes, bytearray, memoryview, str]


def _as_bytes(data: Bytesish) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _exec_body(command: str, timeout: Optional[float], stdin: Optional[Bytesish], tty: bool,
               rows: Optional[int], cols: Optional[int]) -> Dict[str, Any]:
    body: Dict[str, Any] = {"command": command}
    if timeout is not None:
        body["timeout_ms"] = int(timeout * 1000)
    if stdin is not None:
        if isinstance(stdin, str):
            body["stdin"] = stdin
        else:
            body["stdin_base64"] = base64.b64encode(bytes(stdin)).decode("ascii")
    if tty:
        body["tty"] = True
        if rows:
            body["rows"] = rows
        if cols:
            body["cols"] = cols
    return body


class Client:
    """A client of a patina sidecar (``patina serve``).

    ``url`` and ``token`` are found as the patina CLI finds them when
    omitted: ``PATINA_ADDR`` and ``PATINA_TOKEN``, else the state
    directory's ``sidecar.json`` and ``token`` (the state directory is
    ``PATINA_STATE_DIR``, else ``$XDG_STATE_HOME/patina``, else
    ``~/.local/state/patina``), else ``http://127.0.0.1:7070``.
    ``timeout`` (seconds) bounds each call that is not a command or a
    stream (those wait as long as the command runs).

    Example::

        import patina
        client = patina.Client()
        ws = client.create_workspace(name="fix-login", repo="/home/me/src/app")
        result = ws.session("default").exec("make test", timeout=600)
        print(result.exit_code, result.stdout)
        ws.delete()
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, timeout: Optional[float] = 300.0) -> None:
        base, tok = _config.resolve(url, token)
        self._t = Transport(base, tok, timeout)

    @property
    def url(self) -> str:
        """The sidecar's base URL."""
        return self._t.base_url

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Releases nothing (each call has its own connection); for ``with``."""

    def health(self) -> Dict[str, Any]:
        """``GET /healthz``: ``{"status": "ok", "version": ...}`` (no token needed)."""
        return self._t.call("GET", "/healthz")  # type: ignore[no-any-return]

    def openapi(self) -> Dict[str, Any]:
        """The API's OpenAPI 3.1 document, as the sidecar serves it."""
        return self._t.call("GET", "/v1/openapi.json")  # type: ignore[no-any-return]

    def create_workspace(
        self,
        name: Optional[str] = None,
        repo: Optional[str] = None,
        image: Optional[str] = None,
        *,
        base: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        memory_mb: Optional[int] = None,
        cpus: Optional[float] = None,
        pids_limit: Optional[int] = None,
        disk_mb: Optional[int] = None,
        network: Optional[Any] = None,
        idle_stop: Optional[str] = None,
        placement: Optional[Sequence[str]] = None,
        **extra: Any,
    ) -> "Workspace":
        """Creates a workspace: a container with persistent sessions.

        ``repo``: a path inside a git repository on the sidecar's machine;
        the workspace gets a branch ``patina/<name>`` of it, checked out at
        ``/workspace`` (without it: an empty scratch directory, no git).
        ``base``: the ref to branch from (default the repository's HEAD).
        ``image`` (default ``patina/base:bookworm``), ``env`` (set in the
        container), ``memory_mb``, ``cpus``, ``pids_limit``, ``disk_mb``
        (everything it writes must fit), ``network`` (``"bridge"`` or
        ``"none"``), ``idle_stop`` (``"15m"``: stopped when idle, resumed by
        its next use; ``"0"``: never), ``placement`` (Swarm constraints).
        Fields of newer sidecars can be passed as keywords (``extra``).
        Raises ``ConflictError`` when the name is taken, ``InvalidError`` for
        a bad option, ``UnavailableError`` when the image is missing.
        """
        body: Dict[str, Any] = {
            "name": name, "repo": os.path.abspath(repo) if repo else None, "base": base, "image": image,
            "env": dict(env) if env else None, "memory_mb": memory_mb, "cpus": cpus, "pids_limit": pids_limit,
            "disk_mb": disk_mb, "network": network, "idle_stop": idle_stop,
            "placement": list(placement) if placement else None,
        }
        body.update(extra)
        body = {k: v for k, v in body.items() if v is not None}
        return Workspace._from(self, self._t.call("POST", "/v1/workspaces", json_body=body))

    def workspaces(self) -> List["Workspace"]:
        """Every workspace of the sidecar."""
        return [Workspace._from(self, d) for d in self._t.call("GET", "/v1/workspaces") or []]

    def workspace(self, id_or_name: str) -> "Workspace":
        """A workspace by id or name (``NotFoundError`` when there is none)."""
        return Workspace._from(self, self._t.call("GET", "/v1/workspaces/" + quote(id_or_name)))


@dataclass(eq=False)
class Workspace:
    """A workspace: one long-lived container holding persistent sessions and,
    when made from a repository, a git branch of it (diff, commit, merge).

    Its fields are the API's (``id``, ``name``, ``status``, ``branch``,
    ``agent``, ``ports``...); ``refresh()`` reads them again.
    """

    id: str = ""
    name: str = ""
    branch: str = ""
    worktree: str = ""
    repo: str = ""
    base: str = ""
    base_commit: str = ""
    status: str = ""
    error: str = ""
    notice: str = ""
    agent: Optional[AgentStatus] = None
    image: str = ""
    network: Any = ""
    memory_mb: int = 0
    cpus: float = 0.0
    pids_limit: int = 0
    disk_mb: Optional[int] = None
    disk_used_mb: Optional[int] = None
    env: Dict[str, str] = field(default_factory=dict)
    container_id: str = ""
    created_at: str = ""
    ports: List[PortForward] = field(default_factory=list)
    fork_of: str = ""
    idle_stop: str = ""
    placement: List[str] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    client: Optional[Client] = field(default=None, repr=False, compare=False)

    @classmethod
    def _from(cls, client: Client, d: Dict[str, Any]) -> "Workspace":
        agent = from_dict(AgentStatus, d["agent"]) if d.get("agent") else None
        ws = from_dict(cls, d, agent=agent, ports=[PortForward.from_api(p) for p in d.get("ports") or []])
        ws.client = client
        return ws

    def _update(self, d: Dict[str, Any]) -> "Workspace":
        fresh = Workspace._from(self._c, d)
        self.__dict__.update(fresh.__dict__)
        return self

    @property
    def _c(self) -> Client:
        if self.client is None:
            raise PatinaError("this Workspace has no client")
        return self.client

    @property
    def _p(self) -> str:
        return "/v1/workspaces/" + quote(self.id)

    def _call(self, method: str, path: str = "", **kw: Any) -> Any:
        return self._c._t.call(method, self._p + path, **kw)

    # Lifecycle.

    def refresh(self) -> "Workspace":
        """Reads the workspace's fields again (status, agent, ports...)."""
        return self._update(self._call("GET"))

    def stop(self) -> "Workspace":
        """Stops its container; its files, notes and sessions' state stay."""
        return self._update(self._call("POST", "/stop"))

    def start(self) -> "Workspace":
        """Starts (or recreates) its container; each session gets a new shell
        restored from its last state (cwd, variables, functions)."""
        return self._update(self._call("POST", "/start"))

    def fork(self, name: Optional[str] = None) -> "Workspace":
        """A new workspace from this one as it is now: its container's files,
        uncommitted work, repository and sessions' state (not processes)."""
        body = {"name": name} if name else {}
        return Workspace._from(self._c, self._call("POST", "/fork", json_body=body))

    def delete(self, keep_branch: bool = False) -> None:
        """Removes the workspace: container, sessions, files and (unless
        ``keep_branch``) its branch ``patina/<name>``."""
        self._call("DELETE", query={"keep_branch": "1" if keep_branch else None})

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    # Sessions and commands.

    def session(self, id: str = "default", *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> "Session":
        """The session ``id``, created if missing (with ``cwd`` and ``env``,
        which an existing session keeps as it is). A session is a persistent
        bash shell: ``cd``, ``export``, functions and aliases persist."""
        body: Dict[str, Any] = {"id": id}
        if cwd:
            body["cwd"] = cwd
        if env:
            body["env"] = dict(env)
        try:
            return Session(self, id, SessionInfo.from_api(self._call("POST", "/sessions", json_body=body)))
        except ConflictError:
            return Session(self, id)

    def sessions(self) -> List["Session"]:
        """The workspace's sessions."""
        return [Session(self, d["id"], SessionInfo.from_api(d)) for d in self._call("GET", "/sessions") or []]

    def exec(self, command: str, timeout: Optional[float] = None, stdin: Optional[Bytesish] = None, *, session: str = "default") -> ExecResult:
        """Runs ``command`` in a session (``default``, created on first use) and
        waits for it; see ``Session.exec``."""
        return Session(self, session).exec(command, timeout=timeout, stdin=stdin)

    # Files.

    def read_file(self, path: str) -> bytes:
        """A file's bytes (path relative to ``/workspace``). ``InvalidError``
        for a path leaving the workspace or a directory."""
        conn, resp = self._c._t.open("GET", self._p + "/files/" + quote_path(path))
        try:
            if resp.getheader("X-Patina-File-Type") == "dir":
                raise InvalidError("%s is a directory: use list_dir" % path, status=400)
            return resp.read()
        finally:
            conn.close()

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """A file's text."""
        return self.read_file(path).decode(encoding)

    def write_file(self, path: str, data: Bytesish) -> None:
        """Writes a file atomically (text is written as UTF-8), creating its
        parent directories."""
        self._call("PUT", "/files/" + quote_path(path), body=_as_bytes(data), content_type="application/octet-stream")

    def list_dir(self, path: str = "") -> List[FileInfo]:
        """A directory's entries (``""``: ``/workspace`` itself)."""
        p = "/files/" + quote_path(path) if path.strip("/") else "/files"
        conn, resp = self._c._t.open("GET", self._p + p)
        try:
            raw = resp.read()
        finally:
            conn.close()
        if resp.getheader("X-Patina-File-Type") != "dir":
            raise InvalidError("%s is not a directory" % path, status=400)
        return [FileInfo.from_api(d) for d in json.loads(raw)]

    def delete_file(self, path: str) -> None:
        """Removes a file, or a directory and everything in it."""
        self._call("DELETE", "/files/" + quote_path(path))

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        try:
            self._call("HEAD", "/files/" + quote_path(path))
            return True
        except NotFoundError:
            return False

    def upload(self, local_dir: str, remote_dir: str = "") -> int:
        """Copies a local directory tree's regular files into the workspace
        under ``remote_dir``; returns how many files it wrote."""
        n = 0
        for root, _dirs, files in os.walk(local_dir):
            for f in files:
                src = os.path.join(root, f)
                if not os.path.isfile(src) or os.path.islink(src):
                    continue
                rel = os.path.relpath(src, local_dir).replace(os.sep, "/")
                with open(src, "rb") as fh:
                    self.write_file("/".join(p for p in (remote_dir.strip("/"), rel) if p), fh.read())
                n += 1
        return n

    def download(self, remote_dir: str, local_dir: str) -> int:
        """Copies a directory tree of the workspace's regular files to
        ``local_dir`` (created); returns how many files it wrote. Names
        that would leave ``local_dir`` are refused."""
        n = 0
        os.makedirs(local_dir, exist_ok=True)
        root = os.path.realpath(local_dir)
        for e in self.list_dir(remote_dir):
            if e.name in ("", ".", "..") or "/" in e.name or os.sep in e.name:
                raise InvalidError("the workspace listed a bad name %r" % e.name)
            rpath = "/".join(p for p in (remote_dir.strip("/"), e.name) if p)
            lpath = os.path.join(root, e.name)
            if e.type == "dir":
                n += self.download(rpath, lpath)
            elif e.type == "file":
                with open(lpath, "wb") as fh:
                    fh.write(self.read_file(rpath))
                n += 1
        return n

    # Git.

    def diff(self) -> Diff:
        """Its changes against its base (committed, uncommitted, untracked).
        The sidecar remembers what it showed: ``merge()`` takes exactly it."""
        return Diff.from_api(self._call("GET", "/diff"))

    def commit(self, message: str, *, author_name: Optional[str] = None, author_email: Optional[str] = None) -> CommitResult:
        """Commits everything uncommitted in the workspace and records it on
        the branch ``patina/<name>`` of your repository."""
        body: Dict[str, Any] = {"message": message}
        if author_name or author_email:
            body.update(author_name=author_name, author_email=author_email)
        return CommitResult.from_api(self._call("POST", "/commit", json_body=body))

    def merge(self, commit: Optional[str] = None, *, into: Optional[str] = None) -> MergeResult:
        """Merges exactly one commit of the workspace into ``into`` (default:
        the branch it came from): ``commit``, else the one the last
        ``diff()`` showed. ``ConflictError`` when nothing was reviewed, the
        workspace changed since the diff (look again), the diff held
        uncommitted work (commit first), or the merge conflicts; your
        repository is left as it was."""
        body = {k: v for k, v in (("commit", commit), ("into", into)) if v}
        return MergeResult.from_api(self._call("POST", "/merge", json_body=body))

    def apply(self) -> ApplyResult:
        """Stages its changes, squashed, in your working tree (not committed)."""
        return ApplyResult.from_api(self._call("POST", "/apply"))

    def log(self) -> List[LogEntry]:
        """Its log: created, commands run, committed, merged, stopped..."""
        return [LogEntry.from_api(d) for d in self._call("GET", "/log") or []]

    # Ports.

    def forward_port(self, port: int, host_port: Optional[int] = None) -> PortForward:
        """Makes ``port`` inside the workspace reachable on the sidecar's host
        (``.url``, ``.address``). ``NotListeningError`` when nothing listens."""
        body: Dict[str, Any] = {"port": port}
        if host_port:
            body["host_port"] = host_port
        return PortForward.from_api(self._call("POST", "/ports", json_body=body))

    def list_ports(self) -> List[PortForward]:
        """Its forwarded ports, read now (the field ``ports`` is as of the last refresh)."""
        return [PortForward.from_api(p) for p in (self._call("GET", "/ports") or {}).get("ports") or []]

    def close_port(self, port: int) -> None:
        """Stops forwarding ``port`` (its connections are closed)."""
        self._call("DELETE", "/ports/%d" % int(port))


class Session:
    """A persistent bash shell in a workspace: ``cd``, ``export``, functions,
    aliases and options persist from one command to the next. One command
    runs at a time (``BusyError`` otherwise); sessions run in parallel."""

    def __init__(self, workspace: Workspace, id: str, info: Optional[SessionInfo] = None) -> None:
        self.workspace = workspace
        self.id = id
        self.info = info

    def __repr__(self) -> str:
        return "Session(%r, workspace=%r)" % (self.id, self.workspace.name)

    @property
    def _p(self) -> str:
        return "/sessions/" + quote(self.id)

    def _call(self, method: str, path: str = "", **kw: Any) -> Any:
        return self.workspace._call(method, self._p + path, **kw)

    def refresh(self) -> SessionInfo:
        """The session's state now (status, cwd, the command it runs)."""
        self.info = SessionInfo.from_api(self._call("GET"))
        return self.info

    def delete(self) -> None:
        """Ends the shell and every process it started, and removes it."""
        self._call("DELETE")

    def set_env(self, env: Optional[Mapping[str, str]] = None, unset: Optional[Sequence[str]] = None) -> SessionInfo:
        """Exports ``env`` (and unsets ``unset``) in the shell."""
        body: Dict[str, Any] = {"env": dict(env or {})}
        if unset:
            body["unset"] = list(unset)
        self.info = SessionInfo.from_api(self._call("POST", "/env", json_body=body))
        return self.info

    def exec(self, command: str, timeout: Optional[float] = None, stdin: Optional[Bytesish] = None, *,
             tty: bool = False, rows: Optional[int] = None, cols: Optional[int] = None) -> ExecResult:
        """Runs bash text in the shell and waits for it.

        ``timeout`` (seconds) stops the command (SIGINT, a grace, SIGKILL:
        ``timed_out`` is set, the shell keeps its state); ``stdin`` is its
        standard input (text or bytes; none: it reads EOF); ``tty`` runs it
        on a terminal of ``rows`` x ``cols``. A failing command is not an
        error: look at ``exit_code``. Raises ``BusyError`` while another
        command runs, ``EndedError`` once the shell has ended.
        """
        body = _exec_body(command, timeout, stdin, tty, rows, cols)
        return ExecResult.from_api(self._call("POST", "/exec", json_body=body, timeout=None))

    def start(self, command: str, timeout: Optional[float] = None, stdin: Optional[Bytesish] = None, *,
              tty: bool = False, rows: Optional[int] = None, cols: Optional[int] = None) -> "Command":
        """Starts a command in the background and returns it at once: follow
        its output, signal it, wait for it."""
        body = _exec_body(command, timeout, stdin, tty, rows, cols)
        body["async"] = True
        return Command(self, self._call("POST", "/exec", json_body=body)["command_id"])

    def stream(self, command: str, timeout: Optional[float] = None, stdin: Optional[Bytesish] = None) -> "ExecStream":
        """Runs a command and yields its output as it is written::

            s = session.stream("make test")
            for chunk in s:
                print(chunk.stream, chunk.text, end="")
            print(s.result.exit_code)

        Leaving the loop early (or ``close()``) stops the command.
        """
        return ExecStream(self, _exec_body(command, timeout, stdin, False, None, None))

    def history(self) -> List[CommandInfo]:
        """Every command the session ran, oldest first."""
        return [CommandInfo.from_api(d) for d in self._call("GET", "/commands") or []]

    def command(self, id: str) -> "Command":
        """A command of the session by id."""
        return Command(self, id)

    def terminal(self, rows: int = 24, cols: int = 80, *, term: Optional[str] = None, offset: int = 0) -> Terminal:
        """Opens an interactive terminal in the session (a WebSocket): it
        starts from the session's state and hands its state back when it
        ends. Meanwhile exec answers ``BusyError``. See ``Terminal``."""
        t = self.workspace._c._t
        q: Dict[str, Any] = {"rows": rows, "cols": cols}
        if term:
            q["term"] = term
        if offset:
            q["offset"] = offset
        return Terminal.open(t, self.workspace._p + self._p + "/terminal", q)


class ExecStream:
    """A running command's output as an iterator of ``OutputChunk``; once it
    is exhausted, ``result`` is the ``ExecResult`` (with empty output
    fields: the output came as chunks) and ``command_id`` names it."""

    def __init__(self, session: Session, body: Dict[str, Any]) -> None:
        self.session = session
        self.result: Optional[ExecResult] = None
        t = session.workspace._c._t
        self._conn, self._resp = t.open("POST", session.workspace._p + session._p + "/exec", json_body=body,
                                        headers={"Accept": "text/event-stream"}, timeout=None)
        self.command_id: str = self._resp.getheader("X-Patina-Command-Id", "") or ""
        self._events = self._read()

    def _read(self) -> Iterator[OutputChunk]:
        event = ""
        data: List[str] = []
        try:
            for raw in self._resp:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line == "":
                    if event:
                        chunk = self._event(event, "\n".join(data))
                        if chunk is not None:
                            yield chunk
                    event = ""
                    data = []
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    v = line[5:]
                    data.append(v[1:] if v.startswith(" ") else v)
        finally:
            self.close()
        if self.result is None:
            raise PatinaError("the exec stream ended without the command's result")

    def _event(self, event: str, data: str) -> Optional[OutputChunk]:
        d = json.loads(data) if data else {}
        if event in ("stdout", "stderr"):
            b = base64.b64decode(d["data_base64"]) if d.get("data_base64") else d.get("data", "").encode("utf-8")
            return OutputChunk(event, b, int(d.get("offset", 0)))
        if event == "exit":
            self.result = ExecResult.from_api(d.get("result") or {})
        elif event == "error":
            raise PatinaError(str(d.get("data", "the command's result could not be had")), code="internal", status=500)
        return None

    def __iter__(self) -> Iterator[OutputChunk]:
        return self._events

    def __next__(self) -> OutputChunk:
        return next(self._events)

    def wait(self) -> ExecResult:
        """Reads the rest of the output and returns the result."""
        for _ in self._events:
            pass
        assert self.result is not None
        return self.result

    def close(self) -> None:
        """Stops reading (a command still running is stopped by the sidecar)."""
        self._conn.close()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Command:
    """A command of a session, by id: its record, its output by offset or
    followed live, a signal, a wait."""

    def __init__(self, session: Session, id: str) -> None:
        self.session = session
        self.id = id

    def __repr__(self) -> str:
        return "Command(%r, session=%r)" % (self.id, self.session.id)

    @property
    def _p(self) -> str:
        return "/commands/" + quote(self.id)

    def info(self) -> CommandInfo:
        """Its record: ``state`` (running, finished, lost), ``exit_code``, sizes."""
        return CommandInfo.from_api(self.session._call("GET", self._p))

    def read(self, stream: str = "stdout", offset: int = 0) -> bytes:
        """Its output (``stdout`` or ``stderr``) from byte ``offset`` to the
        current end. An offset past the end of a finished command: ``InvalidError``."""
        return b"".join(self.follow(stream, offset, follow=False))

    def follow(self, stream: str = "stdout", offset: int = 0, *, follow: bool = True) -> Iterator[bytes]:
        """Yields its output from ``offset`` as it is written, until it finishes."""
        ws = self.session.workspace
        q: Dict[str, Any] = {"offset": offset}
        if follow:
            q["follow"] = "1"
        return ws._c._t.stream("GET", ws._p + self.session._p + self._p + "/" + quote(stream), query=q)

    def signal(self, signal: str = "INT") -> None:
        """Sends INT, TERM, KILL, HUP, QUIT (these stop it as a timeout does),
        USR1 or USR2. ``NotRunningError`` once it has finished."""
        self.session._call("POST", self._p + "/signal", json_body={"signal": signal})

    def wait(self, timeout: Optional[float] = None) -> CommandInfo:
        """Waits until it finishes (at most ``timeout`` seconds: then
        ``TimeoutError``) and returns its record."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.02
        while True:
            info = self.info()
            if info.state != "running":
                return info
            if deadline is None:
                try:
                    # Following from far past the end returns when it finishes.
                    for _ in self.follow("stdout", 1 << 62):
                        pass
                except InvalidError:
                    pass  # it finished meanwhile
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("command %s still runs after %ss" % (self.id, timeout))
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.5)
