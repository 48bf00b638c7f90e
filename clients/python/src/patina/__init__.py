"""patina: isolated, persistent workspaces for AI coding agents, from Python.

A client of the patina sidecar (``patina serve``)'s HTTP API, standard
library only. The synchronous API::

    import patina

    client = patina.Client()                       # PATINA_ADDR/PATINA_TOKEN or the state directory
    ws = client.create_workspace(name="fix-login", repo="/home/me/src/app")
    sh = ws.session("default")                     # a persistent bash shell (created if missing)
    r = sh.exec("cd src && make test", timeout=600)
    print(r.exit_code, r.stdout, r.stderr)
    for chunk in sh.stream("make test"):           # output as it is written
        print(chunk.text, end="")
    ws.write_file("src/fix.py", "...")
    d = ws.diff()                                  # review...
    ws.commit("Fix the login")                     # ...record...
    ws.merge()                                     # ...merge exactly what was reviewed
    ws.delete()

``patina.aio.AsyncClient`` is the same with ``await``. Errors are
exceptions named after the API's codes (``BusyError``, ``EndedError``,
``NotFoundError``, ``ConflictError``...), all ``PatinaError``.
"""

from .client import Client, Command, ExecStream, Session, Workspace
from .errors import (
    AdoptingError,
    AgentUnavailableError,
    BusyError,
    ConflictError,
    EndedError,
    InternalError,
    InvalidError,
    MethodNotAllowedError,
    NoRepositoryError,
    NotFoundError,
    NotListeningError,
    NotRunningError,
    NotSidecarError,
    PatinaConnectionError,
    PatinaError,
    RejectedError,
    StoppedError,
    TooLargeError,
    UnauthorizedError,
    UnavailableError,
)
from .terminal import Terminal, TerminalEvent
from .types import (
    AgentStatus,
    ApplyResult,
    CommandInfo,
    CommitResult,
    Diff,
    ExecResult,
    FileInfo,
    FileStat,
    LogEntry,
    MergeResult,
    OutputChunk,
    PortForward,
    SessionInfo,
)

__version__ = "0.1.0"

__all__ = [
    "Client", "Workspace", "Session", "Command", "ExecStream", "Terminal", "TerminalEvent",
    "AgentStatus", "ApplyResult", "CommandInfo", "CommitResult", "Diff", "ExecResult", "FileInfo", "FileStat",
    "LogEntry", "MergeResult", "OutputChunk", "PortForward", "SessionInfo",
    "PatinaError", "PatinaConnectionError", "NotSidecarError", "InvalidError", "UnauthorizedError", "NotFoundError",
    "MethodNotAllowedError", "BusyError", "EndedError", "StoppedError", "NotRunningError", "ConflictError",
    "NoRepositoryError", "NotListeningError", "TooLargeError", "RejectedError", "UnavailableError",
    "AgentUnavailableError", "AdoptingError", "InternalError",
]
