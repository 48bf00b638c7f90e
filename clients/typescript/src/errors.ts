/**
 * Errors of the patina client: one class per code of the API. Every error
 * answer of the sidecar is `{"error": "...", "code": "..."}`; the client
 * throws the class named after its code with the server's message, the code
 * and the HTTP status. All are `PatinaError`:
 *
 * ```ts
 * try { await session.exec("make"); }
 * catch (e) { if (e instanceof BusyError) { ... } }
 * ```
 */
export class PatinaError extends Error {
  /** The API's code ("busy", "not_found", ...). */
  readonly code: string;
  /** The HTTP status (0 when the sidecar could not be reached). */
  readonly status: number;
  constructor(message: string, code = "", status = 0) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}

/** The sidecar could not be reached: nothing ran, it is safe to retry. */
export class PatinaConnectionError extends PatinaError {}
/** 400 `invalid`: a bad request (a bad name, path, limit, offset...). */
export class InvalidError extends PatinaError {}
/** 401 `unauthorized`: a missing or wrong token. */
export class UnauthorizedError extends PatinaError {}
/**
 * The server at the sidecar's address could not prove it holds the token
 * (`GET /v1/identify`), so the token was not sent to it: the token is not
 * that sidecar's, or another program listens there (a dead sidecar's port,
 * taken). Code `not_sidecar`, status 0.
 */
export class NotSidecarError extends UnauthorizedError {}
/** 404 `not_found`: no such workspace, session, command, file or port. */
export class NotFoundError extends PatinaError {}
/** 405 `method_not_allowed`. */
export class MethodNotAllowedError extends PatinaError {}
/** 409 `busy`: the session runs another command (or a terminal is attached). */
export class BusyError extends PatinaError {}
/** 409 `ended`: the session's shell has ended; delete the session for a new one. */
export class EndedError extends PatinaError {}
/** 409 `stopped`: the workspace is stopped; `workspace.start()` starts it. */
export class StoppedError extends PatinaError {}
/** 409 `not_running`: the command already finished. */
export class NotRunningError extends PatinaError {}
/** 409 `conflict`: a name taken, a merge conflict, or a merge of something not reviewed. */
export class ConflictError extends PatinaError {}
/** 409 `no_repository`: a git operation on a workspace made without `repo`. */
export class NoRepositoryError extends PatinaError {}
/** 409 `not_listening`: nothing listens on that port inside the workspace. */
export class NotListeningError extends PatinaError {}
/** 413 `too_large`: a body over the limit, or a pack over one of patina's limits. */
export class TooLargeError extends PatinaError {}
/** 422 `rejected`: objects the workspace sent failed patina's checks. */
export class RejectedError extends PatinaError {}
/** 503 `unavailable`: an image is missing (the message says how to build it)... */
export class UnavailableError extends PatinaError {}
/** 503 `agent_unavailable`: the workspace's agent cannot be reached. */
export class AgentUnavailableError extends PatinaError {}
/** 503 `adopting`: the sidecar just started and is reconnecting to the workspace. */
export class AdoptingError extends PatinaError {}
/** 500 `internal`: anything else. */
export class InternalError extends PatinaError {}

const byCode: Record<string, new (message: string, code: string, status: number) => PatinaError> = {
  invalid: InvalidError,
  unauthorized: UnauthorizedError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  busy: BusyError,
  ended: EndedError,
  stopped: StoppedError,
  not_running: NotRunningError,
  conflict: ConflictError,
  no_repository: NoRepositoryError,
  not_listening: NotListeningError,
  too_large: TooLargeError,
  rejected: RejectedError,
  unavailable: UnavailableError,
  agent_unavailable: AgentUnavailableError,
  adopting: AdoptingError,
  internal: InternalError,
};

// The code of a status that has one only (an answer without a body: HEAD).
const byStatus: Record<number, string> = {
  400: "invalid", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
  413: "too_large", 422: "rejected", 500: "internal",
};

/** The error for an answer's status and body. */
export function errorFrom(status: number, body: Uint8Array): PatinaError {
  const text = new TextDecoder().decode(body);
  let code = "";
  let message = text.trim() || `HTTP ${status}`;
  try {
    const j = JSON.parse(text) as { error?: unknown; code?: unknown };
    if (typeof j.code === "string") code = j.code;
    if (typeof j.error === "string") message = j.error;
  } catch {
    code = byStatus[status] ?? "";
  }
  const cls = byCode[code] ?? PatinaError;
  return new cls(message, code || `http_${status}`, status);
}
