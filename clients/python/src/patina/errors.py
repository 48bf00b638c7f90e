"""Errors of the patina client: one exception class per code of the API.

Every error answer of the sidecar is ``{"error": "...", "code": "..."}``;
the client raises the class named after its code, carrying the server's
message (``str(err)``), the code and the HTTP status. Catch ``PatinaError``
for any of them::

    try:
        session.exec("make")
    except patina.BusyError:
        ...  # the session runs another command
    except patina.EndedError as e:
        print(e.message)  # how the shell ended
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class PatinaError(Exception):
    """An error answer of the sidecar (or a failure to reach it).

    Attributes: ``message`` (the server's message), ``code`` (the API's
    code, such as ``"busy"``), ``status`` (the HTTP status, 0 when the
    sidecar could not be reached).
    """

    code: str = ""

    def __init__(self, message: str, code: Optional[str] = None, status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status

    def __str__(self) -> str:
        return self.message


class PatinaConnectionError(PatinaError):
    """The sidecar could not be reached (nothing listens at its address, say).
    Nothing ran: it is safe to retry once the sidecar runs."""

    code = "connection"


class InvalidError(PatinaError):
    """400 ``invalid``: a bad request (a bad name, path, limit, offset...)."""

    code = "invalid"


class UnauthorizedError(PatinaError):
    """401 ``unauthorized``: a missing or wrong token."""

    code = "unauthorized"


class NotSidecarError(UnauthorizedError):
    """The server at the sidecar's address could not prove it holds the
    token (``GET /v1/identify``), so the token was not sent to it: the token
    is not that sidecar's, or another program listens there (a dead
    sidecar's port, taken). Code ``not_sidecar``, status 0."""

    code = "not_sidecar"


class NotFoundError(PatinaError):
    """404 ``not_found``: no such workspace, session, command, file or port."""

    code = "not_found"


class MethodNotAllowedError(PatinaError):
    """405 ``method_not_allowed``."""

    code = "method_not_allowed"


class BusyError(PatinaError):
    """409 ``busy``: the session runs another command (or a terminal is attached)."""

    code = "busy"


class EndedError(PatinaError):
    """409 ``ended``: the session's shell has ended (``exit``, ``exec``, ``set -e``...).
    Delete the session and use it again for a new shell."""

    code = "ended"


class StoppedError(PatinaError):
    """409 ``stopped``: the workspace is stopped; ``workspace.start()`` starts it."""

    code = "stopped"


class NotRunningError(PatinaError):
    """409 ``not_running``: the command already finished."""

    code = "not_running"


class ConflictError(PatinaError):
    """409 ``conflict``: a name taken, a merge conflict, uncommitted changes in
    the way, or a merge of something not reviewed (look at the diff first)."""

    code = "conflict"


class NoRepositoryError(PatinaError):
    """409 ``no_repository``: a git operation on a workspace made without ``repo``."""

    code = "no_repository"


class NotListeningError(PatinaError):
    """409 ``not_listening``: nothing listens on that port inside the workspace."""

    code = "not_listening"


class TooLargeError(PatinaError):
    """413 ``too_large``: a body over the limit, or a pack over one of patina's limits."""

    code = "too_large"


class RejectedError(PatinaError):
    """422 ``rejected``: objects the workspace sent failed patina's checks."""

    code = "rejected"


class UnavailableError(PatinaError):
    """503 ``unavailable``: an image is missing (the message says how to build it)..."""

    code = "unavailable"


class AgentUnavailableError(PatinaError):
    """503 ``agent_unavailable``: the workspace's agent cannot be reached."""

    code = "agent_unavailable"


class AdoptingError(PatinaError):
    """503 ``adopting``: the sidecar just started and is reconnecting to the workspace."""

    code = "adopting"


class InternalError(PatinaError):
    """500 ``internal``: anything else."""

    code = "internal"


ERRORS: Dict[str, Type[PatinaError]] = {
    cls.code: cls
    for cls in (
        InvalidError, UnauthorizedError, NotFoundError, MethodNotAllowedError, BusyError, EndedError,
        StoppedError, NotRunningError, ConflictError, NoRepositoryError, NotListeningError, TooLargeError,
        RejectedError, UnavailableError, AgentUnavailableError, AdoptingError, InternalError,
    )
}


def error_for(status: int, code: str, message: str) -> PatinaError:
    """The exception for an error answer (``PatinaError`` for an unknown code)."""
    cls = ERRORS.get(code, PatinaError)
    return cls(message, code=code or "http_%d" % status, status=status)
