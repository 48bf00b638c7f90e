// The API's values, as the sidecar answers them (see its OpenAPI document,
// GET /v1/openapi.json). Times are RFC 3339 strings.

/** A workspace's agent: the process in its container that runs its sessions. */
export interface AgentStatus {
  connected: boolean;
  pid?: number;
  version?: string;
  started_at?: string;
  restarts: number;
  last_restart?: string;
  last_restart_reason?: string;
  error?: string;
}

/** A workspace port reachable on the sidecar's host: plain TCP at `address`. */
export interface PortForward {
  port: number;
  address: string;
  url: string;
  connections: number;
  created_at: string;
}

/** A workspace's fields. */
export interface WorkspaceInfo {
  id: string;
  name: string;
  /** `patina/<name>` for a repository workspace, "" without one. */
  branch: string;
  worktree: string;
  repo?: string;
  base?: string;
  base_commit?: string;
  /** running, stopped or adopting. */
  status: string;
  /** Why it is stopped when nobody stopped it. */
  error?: string;
  notice?: string;
  agent?: AgentStatus;
  image: string;
  network: unknown;
  memory_mb: number;
  cpus: number;
  pids_limit: number;
  disk_mb?: number;
  disk_used_mb?: number;
  env?: Record<string, string>;
  container_id?: string;
  created_at: string;
  ports?: PortForward[];
  fork_of?: string;
  idle_stop?: string;
  placement?: string[];
}

/** Options of `client.createWorkspace` (all optional). */
export interface CreateWorkspaceOptions {
  /** Names the workspace and its branch `patina/<name>`; generated when absent. */
  name?: string;
  /** A path inside a git repository on the sidecar's machine (absent: a scratch workspace). */
  repo?: string;
  /** The ref to branch from (default the repository's HEAD). */
  base?: string;
  /** The container image (default patina/base:bookworm). */
  image?: string;
  /** Set in the container (and so in every session). */
  env?: Record<string, string>;
  memory_mb?: number;
  cpus?: number;
  pids_limit?: number;
  /** Everything the workspace writes must fit in this many MiB. */
  disk_mb?: number;
  /** "bridge" (default) or "none". */
  network?: unknown;
  /** Stop when idle this long ("15m"; "0": never); resumed by its next use. */
  idle_stop?: string;
  /** Swarm placement constraints. */
  placement?: string[];
  /** Fields of newer sidecars. */
  [field: string]: unknown;
}

/** A session's state: status idle, running, ended (exit_code, end_reason) or closed. */
export interface SessionInfo {
  id: string;
  cwd: string;
  status: string;
  created_at: string;
  running?: string;
  commands: number;
  exit_code?: number;
  end_reason?: string;
  replacements?: number;
  terminal?: boolean;
}

/**
 * The outcome of a command. `stdout`/`stderr` are text (invalid UTF-8
 * replaced: `stdout_base64` then holds the bytes; see `stdoutBytes()`).
 * Over 1 MiB per stream: the head here, `stdout_tail` the last MiB,
 * `stdout_truncated` set, `stdout_bytes` the full size.
 */
export interface ExecResult {
  command_id: string;
  /** 0-255; 128+N when signal N ended it (130 after a timeout); -1 when the shell could not report it. */
  exit_code: number;
  stdout: string;
  stderr: string;
  stdout_base64?: string;
  stderr_base64?: string;
  stdout_tail?: string;
  stderr_tail?: string;
  stdout_tail_base64?: string;
  stderr_tail_base64?: string;
  stdout_bytes: number;
  stderr_bytes: number;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  timed_out: boolean;
  interrupted: boolean;
  /** The command ended the shell (`exit 3`): later execs throw EndedError. */
  session_ended: boolean;
  shell_replaced?: boolean;
  resumed?: boolean;
  notice?: string;
  cwd?: string;
  duration_ms: number;
}

/** A command's history record: state running, finished or lost. */
export interface CommandInfo {
  id: string;
  command: string;
  state: string;
  started_at: string;
  ended_at?: string;
  exit_code?: number;
  stdout_bytes: number;
  stderr_bytes: number;
  timed_out?: boolean;
  interrupted?: boolean;
  session_ended?: boolean;
  shell_replaced?: boolean;
  output_pruned?: boolean;
}

/** A piece of a streamed command's output. */
export interface OutputChunk {
  stream: "stdout" | "stderr";
  data: Uint8Array;
  /** Where `data` starts in its stream. */
  offset: number;
  /** `data` as text. */
  text: string;
}

/** An entry of a directory listing: type file, dir, symlink or other. */
export interface FileInfo {
  name: string;
  type: string;
  size: number;
  mode: string;
  mod_time: string;
}

/** A changed file: status added, modified, deleted, renamed, copied or typechange. */
export interface FileStat {
  path: string;
  old_path?: string;
  status: string;
  added: number;
  deleted: number;
  binary?: boolean;
}

/** The workspace's changes; `commit` is what it shows (merge() takes exactly it). */
export interface Diff {
  base: string;
  commit?: string;
  text: string;
  files: FileStat[];
  truncated?: boolean;
  files_truncated?: boolean;
  /** Part of it is not committed: commit before merging. */
  uncommitted?: boolean;
}

export interface CommitResult {
  commit: string;
  /** False when there was nothing to commit. */
  committed: boolean;
  /** It records exactly what the last diff showed: merge() takes it. */
  reviewed: boolean;
}

export interface MergeResult {
  into: string;
  previous: string;
  commit: string;
  /** The workspace's commit that was merged. */
  merged: string;
  fast_forward: boolean;
  up_to_date: boolean;
  uncommitted: boolean;
}

export interface ApplyResult {
  dir: string;
  files: FileStat[];
}

export interface LogEntry {
  time: string;
  kind: string;
  exit_code?: number;
  message: string;
  line: string;
}

/** Options of an exec. */
export interface ExecOptions {
  /** Stop the command after this many milliseconds (SIGINT, a grace, SIGKILL). */
  timeoutMs?: number;
  /** Its standard input (none: it reads EOF). */
  stdin?: string | Uint8Array;
  /** Run it on a terminal of rows x cols. */
  tty?: boolean;
  rows?: number;
  cols?: number;
}
