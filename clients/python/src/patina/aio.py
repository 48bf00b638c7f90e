"""The asyncio flavour: the same API with ``await``.

Each call runs the synchronous client's in a worker thread
(``asyncio.to_thread``), so the event loop never blocks on the sidecar;
streams are async iterators::

    import asyncio, patina.aio

    async def main():
        client = patina.aio.AsyncClient()
        ws = await client.create_workspace(name="demo")
        session = await ws.session("default")
        result = await session.exec("echo hi")
        async for chunk in session.stream("make test"):
            print(chunk.text, end="")
        await ws.delete()

    asyncio.run(main())
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, TypeVar

from .client import Bytesish, Client, Command, ExecStream, Session, Workspace
from .terminal import Terminal, TerminalEvent
from .types import (
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
)

R = TypeVar("R")
_DONE = object()


async def _run(fn: Callable[..., R], *args: Any, **kw: Any) -> R:
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kw))


async def _aiter(it: Iterator[Any]) -> AsyncIterator[Any]:
    while True:
        item = await _run(next, it, _DONE)
        if item is _DONE:
            return
        yield item


class AsyncClient:
    """``patina.Client`` with ``await``: see it for the arguments."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, timeout: Optional[float] = 300.0) -> None:
        self.sync = Client(url, token, timeout=timeout)

    @property
    def url(self) -> str:
        return self.sync.url

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.sync.close()

    async def health(self) -> Dict[str, Any]:
        return await _run(self.sync.health)

    async def openapi(self) -> Dict[str, Any]:
        return await _run(self.sync.openapi)

    async def create_workspace(self, name: Optional[str] = None, repo: Optional[str] = None, image: Optional[str] = None,
                               **options: Any) -> "AsyncWorkspace":
        """See ``Client.create_workspace``."""
        return AsyncWorkspace(await _run(self.sync.create_workspace, name, repo, image, **options))

    async def workspaces(self) -> List["AsyncWorkspace"]:
        return [AsyncWorkspace(w) for w in await _run(self.sync.workspaces)]

    async def workspace(self, id_or_name: str) -> "AsyncWorkspace":
        return AsyncWorkspace(await _run(self.sync.workspace, id_or_name))


class AsyncWorkspace:
    """``patina.Workspace`` with ``await``; ``sync`` is the synchronous one
    (its fields: ``ws.sync.status``; ``id`` and ``name`` are here too)."""

    def __init__(self, sync: Workspace) -> None:
        self.sync = sync

    def __repr__(self) -> str:
        return "AsyncWorkspace(%r)" % self.sync.name

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def name(self) -> str:
        return self.sync.name

    @property
    def status(self) -> str:
        return self.sync.status

    async def refresh(self) -> "AsyncWorkspace":
        await _run(self.sync.refresh)
        return self

    async def stop(self) -> "AsyncWorkspace":
        await _run(self.sync.stop)
        return self

    async def start(self) -> "AsyncWorkspace":
        await _run(self.sync.start)
        return self

    async def fork(self, name: Optional[str] = None) -> "AsyncWorkspace":
        return AsyncWorkspace(await _run(self.sync.fork, name))

    async def delete(self, keep_branch: bool = False) -> None:
        await _run(self.sync.delete, keep_branch)

    async def session(self, id: str = "default", *, cwd: Optional[str] = None,
                      env: Optional[Mapping[str, str]] = None) -> "AsyncSession":
        return AsyncSession(await _run(self.sync.session, id, cwd=cwd, env=env))

    async def sessions(self) -> List["AsyncSession"]:
        return [AsyncSession(s) for s in await _run(self.sync.sessions)]

    async def exec(self, command: str, timeout: Optional[float] = None, stdin: Optional[Bytesish] = None, *,
                   session: str = "default") -> ExecResult:
        return await _run(self.sync.exec, command, timeout, stdin, session=session)

    async def read_file(self, path: str) -> bytes:
        return await _run(self.sync.read_file, path)

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return await _run(self.sync.read_text, path, encoding)

    async def write_file(self, path: str, data: Bytesish) -> None:
        await _run(self.sync.write_file, path, data)

    async def list_dir(self, path: str = "") -> List[FileInfo]:
        return await _run(self.sync.list_dir, path)

    async def delete_file(self, path: str) -> None:
        await _run(self.sync.delete_file, path)

    async def exists(self, path: str) -> bool:
        return await _run(self.sync.exists, path)

    async def upload(self, local_dir: str, remote_dir: str = "") -> int:
        return await _run(self.sync.upload, local_dir, remote_dir)

    async def download(self, remote_dir: str, local_dir: str) -> int:
        return await _run(self.sync.download, remote_dir, local_dir)

    async def diff(self) -> Diff:
        return await _run(self.sync.diff)

    async def commit(self, message: str, *, author_name: Optional[str] = None, author_email: Optional[str] = None) -> CommitResult:
        return await _run(self.sync.commit, message, author_name=author_name, author_email=author_email)

    async def merge(self, commit: Optional[str] = None, *, into: Optional[str] = None) -> MergeResult:
        return await _run(self.sync.merge, commit, into=into)

    async def apply(self) -> ApplyResult:
        return await _run(self.sync.apply)

    async def log(self) -> List[LogEntry]:
        return await _run(self.sync.log)

    async def forward_port(self, port: int, host_port: Optional[int] = None) -> PortForward:
        return await _run(self.sync.forward_port, port, host_port)

    async def list_ports(self) -> List[PortForward]:
        return await _run(self.sync.list_ports)

    async def close_port(self, port: int) -> None:
        await _run(self.sync.close_port, port)


class AsyncSession:
    """``patina.Session`` with ``await``."""

    def __init__(self, sync: Session) -> None:
        self.sync = sync

    @property
    def id(self) -> str:
        return self.sync.id

    async def refresh(self) -> SessionInfo:
        return await _run(self.sync.refresh)

    async def delete(self) -> None:
        await _run(self.sync.delete)

    async def set_env(self, env: Optional[Mapping[str, str]] = None, unset: Optional[Sequence[str]] = None) -> SessionInfo:
        return await _run(self.sync.set_env, env, unset)

    async def exec(self, command: str, timeout: Optional[float] = None, stdin: Optional[Bytesish] = None, *,
                   tty: bool = False, rows: Optional[int] = None, cols: Optional[int] = None) -> ExecResult:
        """See ``Session.exec``. Cancelling the await does not stop the
        command: use ``timeout``, or ``start()`` and ``signal()``."""
        return await _run(self.sync.exec, command, timeout, stdin, tty=tty, rows=rows, cols=cols)

    async def start(self, command: str, timeout: Optional[float] = None, stdin: Optional[Bytesish] = None) -> "AsyncCommand":
        return AsyncCommand(await _run(self.sync.start, command, timeout, stdin))

    def stream(self, command: str, timeout: Optional[float] = None, stdin: Optional[Bytesish] = None) -> "AsyncExecStream":
        """``async for chunk in session.stream(...)``; then ``.result``."""
        return AsyncExecStream(functools.partial(self.sync.stream, command, timeout, stdin))

    async def history(self) -> List[CommandInfo]:
        return await _run(self.sync.history)

    def command(self, id: str) -> "AsyncCommand":
        return AsyncCommand(self.sync.command(id))

    async def terminal(self, rows: int = 24, cols: int = 80, *, term: Optional[str] = None, offset: int = 0) -> "AsyncTerminal":
        return AsyncTerminal(await _run(self.sync.terminal, rows, cols, term=term, offset=offset))


class AsyncExecStream:
    """A streamed command's output as an async iterator of ``OutputChunk``."""

    def __init__(self, open_: Callable[[], ExecStream]) -> None:
        self._open = open_
        self._sync: Optional[ExecStream] = None
        self.result: Optional[ExecResult] = None

    @property
    def command_id(self) -> str:
        return self._sync.command_id if self._sync else ""

    def __aiter__(self) -> AsyncIterator[OutputChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[OutputChunk]:
        self._sync = await _run(self._open)
        try:
            async for chunk in _aiter(iter(self._sync)):
                yield chunk
        finally:
            self.result = self._sync.result
            self._sync.close()

    async def wait(self) -> ExecResult:
        async for _ in self:
            pass
        assert self.result is not None
        return self.result


class AsyncCommand:
    """``patina.Command`` with ``await``."""

    def __init__(self, sync: Command) -> None:
        self.sync = sync

    @property
    def id(self) -> str:
        return self.sync.id

    async def info(self) -> CommandInfo:
        return await _run(self.sync.info)

    async def read(self, stream: str = "stdout", offset: int = 0) -> bytes:
        return await _run(self.sync.read, stream, offset)

    def follow(self, stream: str = "stdout", offset: int = 0) -> AsyncIterator[bytes]:
        return self._follow(stream, offset)

    async def _follow(self, stream: str, offset: int) -> AsyncIterator[bytes]:
        it = await _run(lambda: iter(self.sync.follow(stream, offset)))
        async for chunk in _aiter(it):
            yield chunk

    async def signal(self, signal: str = "INT") -> None:
        await _run(self.sync.signal, signal)

    async def wait(self, timeout: Optional[float] = None) -> CommandInfo:
        return await _run(self.sync.wait, timeout)


class AsyncTerminal:
    """``patina.Terminal`` with ``await``."""

    def __init__(self, sync: Terminal) -> None:
        self.sync = sync

    @property
    def hello(self) -> Dict[str, Any]:
        return self.sync.hello

    @property
    def exit_code(self) -> Optional[int]:
        return self.sync.exit_code

    async def recv(self) -> TerminalEvent:
        return await _run(self.sync.recv)

    async def read_until(self, needle: Any, limit: int = 1 << 20) -> bytes:
        return await _run(self.sync.read_until, needle, limit)

    async def write(self, data: Any) -> None:
        await _run(self.sync.write, data)

    async def resize(self, rows: int, cols: int) -> None:
        await _run(self.sync.resize, rows, cols)

    async def end(self) -> None:
        await _run(self.sync.end)

    async def close(self) -> None:
        await _run(self.sync.close)
