import { homedir } from "node:os";
import { mkdir, readdir, readFile, writeFile as fsWriteFile } from "node:fs/promises";
import { join, resolve as resolvePath, sep } from "node:path";
import { resolve } from "./config.js";
import { ConflictError, InvalidError, NotFoundError, PatinaError } from "./errors.js";
import { filePath, header, readAll, seg, Transport } from "./http.js";
import { Terminal } from "./terminal.js";
import type {
  ApplyResult,
  CommandInfo,
  CommitResult,
  CreateWorkspaceOptions,
  Diff,
  ExecOptions,
  ExecResult,
  FileInfo,
  LogEntry,
  MergeResult,
  OutputChunk,
  PortForward,
  SessionInfo,
  WorkspaceInfo,
} from "./types.js";

/** Options of `new Client()`. */
export interface ClientOptions {
  /** The sidecar's address ("127.0.0.1:7070" or a URL); found as the CLI finds it when absent. */
  url?: string;
  /** The bearer token; found as the CLI finds it when absent. */
  token?: string;
  /** Bounds each call that is not a command or a stream, in ms (default 300000). */
  timeoutMs?: number;
}

function execBody(command: string, o: ExecOptions = {}): Record<string, unknown> {
  const body: Record<string, unknown> = { command };
  if (o.timeoutMs !== undefined) body.timeout_ms = Math.round(o.timeoutMs);
  if (typeof o.stdin === "string") body.stdin = o.stdin;
  else if (o.stdin !== undefined) body.stdin_base64 = Buffer.from(o.stdin).toString("base64");
  if (o.tty) {
    body.tty = true;
    if (o.rows) body.rows = o.rows;
    if (o.cols) body.cols = o.cols;
  }
  return body;
}

const enc = (s: string | Uint8Array): Uint8Array => (typeof s === "string" ? new TextEncoder().encode(s) : s);

/** stdout's exact bytes (the head, when truncated). */
export function stdoutBytes(r: ExecResult): Uint8Array {
  return r.stdout_base64 ? Buffer.from(r.stdout_base64, "base64") : enc(r.stdout);
}

/** stderr's exact bytes (the head, when truncated). */
export function stderrBytes(r: ExecResult): Uint8Array {
  return r.stderr_base64 ? Buffer.from(r.stderr_base64, "base64") : enc(r.stderr);
}

/**
 * A client of a patina sidecar (`patina serve`). The address and token are
 * found as the patina CLI finds them when omitted: PATINA_ADDR and
 * PATINA_TOKEN, else the state directory's sidecar.json and token
 * (PATINA_STATE_DIR, else $XDG_STATE_HOME/patina, else
 * ~/.local/state/patina), else http://127.0.0.1:7070.
 *
 * ```ts
 * const client = new Client();
 * const ws = await client.createWorkspace({ name: "fix-login", repo: "/home/me/src/app" });
 * const r = await (await ws.session("default")).exec("make test", { timeoutMs: 600_000 });
 * console.log(r.exit_code, r.stdout);
 * await ws.delete();
 * ```
 */
export class Client {
  /** @internal */
  readonly t: Transport;

  constructor(o: ClientOptions = {}) {
    const c = resolve(o.url, o.token, process.env, homedir());
    this.t = new Transport(c.url, c.token, o.timeoutMs ?? 300_000);
  }

  /** The sidecar's base URL. */
  get url(): string {
    return this.t.base;
  }

  /** GET /healthz (no token needed). */
  health(): Promise<{ status: string; version: string }> {
    return this.t.call("GET", "/healthz");
  }

  /** The API's OpenAPI 3.1 document, as the sidecar serves it. */
  openapi(): Promise<Record<string, any>> {
    return this.t.call("GET", "/v1/openapi.json");
  }

  /**
   * Creates a workspace: a container with persistent sessions; with `repo`
   * a branch `patina/<name>` of that repository at /workspace. Throws
   * ConflictError (name taken), InvalidError, UnavailableError (image missing).
   */
  async createWorkspace(o: CreateWorkspaceOptions = {}): Promise<Workspace> {
    const body: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(o)) if (v !== undefined) body[k] = v;
    if (typeof body.repo === "string") body.repo = resolvePath(body.repo);
    return new Workspace(this, await this.t.call<WorkspaceInfo>("POST", "/v1/workspaces", { json: body }));
  }

  /** Every workspace of the sidecar. */
  async workspaces(): Promise<Workspace[]> {
    return (await this.t.call<WorkspaceInfo[]>("GET", "/v1/workspaces")).map((w) => new Workspace(this, w));
  }

  /** A workspace by id or name (NotFoundError when there is none). */
  async workspace(idOrName: string): Promise<Workspace> {
    return new Workspace(this, await this.t.call<WorkspaceInfo>("GET", `/v1/workspaces/${seg(idOrName)}`));
  }
}

export interface Workspace extends WorkspaceInfo {}

/**
 * A workspace: one long-lived container holding persistent sessions and,
 * when made from a repository, a git branch of it. Its fields are the
 * API's (id, name, status, branch, agent, ports...); `refresh()` reads
 * them again.
 */
export class Workspace {
  readonly client!: Client;

  constructor(client: Client, info: WorkspaceInfo) {
    Object.defineProperty(this, "client", { value: client, enumerable: false });
    Object.assign(this, info);
  }

  private get p(): string {
    return `/v1/workspaces/${seg(this.id)}`;
  }

  /** @internal */
  call<T>(method: string, path = "", o: Parameters<Transport["call"]>[2] = {}): Promise<T> {
    return this.client.t.call<T>(method, this.p + path, o);
  }

  private update(info: WorkspaceInfo): this {
    for (const k of Object.keys(this)) delete (this as Record<string, unknown>)[k];
    Object.assign(this, info);
    return this;
  }

  /** Reads its fields again (status, agent, ports...). */
  async refresh(): Promise<this> {
    return this.update(await this.call("GET"));
  }

  /** Stops its container; files, notes and sessions' state stay. */
  async stop(): Promise<this> {
    return this.update(await this.call("POST", "/stop"));
  }

  /** Starts (or recreates) its container; each session gets a new shell restored from its last state. */
  async start(): Promise<this> {
    return this.update(await this.call("POST", "/start"));
  }

  /** A new workspace from this one as it is now (files, uncommitted work, repository, sessions' state; not processes). */
  async fork(name?: string): Promise<Workspace> {
    return new Workspace(this.client, await this.call("POST", "/fork", { json: name ? { name } : {} }));
  }

  /** Removes the workspace: container, sessions, files and (unless keepBranch) its branch. */
  async delete(o: { keepBranch?: boolean } = {}): Promise<void> {
    await this.call("DELETE", "", { query: { keep_branch: o.keepBranch ? "1" : undefined } });
  }

  /**
   * The session `id` (default "default"), created if missing (with `cwd`
   * and `env`; an existing one keeps its own). A persistent bash shell:
   * cd, export, functions and aliases persist.
   */
  async session(id = "default", o: { cwd?: string; env?: Record<string, string> } = {}): Promise<Session> {
    try {
      const info = await this.call<SessionInfo>("POST", "/sessions", { json: { id, ...o } });
      return new Session(this, id, info);
    } catch (e) {
      if (e instanceof ConflictError) return new Session(this, id);
      throw e;
    }
  }

  /** The workspace's sessions. */
  async sessions(): Promise<Session[]> {
    return (await this.call<SessionInfo[]>("GET", "/sessions")).map((s) => new Session(this, s.id, s));
  }

  /** Runs a command in session `session` (default "default"); see Session.exec. */
  exec(command: string, o: ExecOptions & { session?: string } = {}): Promise<ExecResult> {
    return new Session(this, o.session ?? "default").exec(command, o);
  }

  // Files.

  /** A file's bytes (path relative to /workspace). */
  async readFile(path: string): Promise<Uint8Array> {
    const res = await this.client.t.open("GET", `${this.p}/files/${filePath(path)}`);
    const b = await readAll(res);
    if (header(res, "X-Patina-File-Type") === "dir") throw new InvalidError(`${path} is a directory: use listDir`, "invalid", 400);
    return b;
  }

  /** A file's text. */
  async readText(path: string): Promise<string> {
    return new TextDecoder().decode(await this.readFile(path));
  }

  /** Writes a file atomically (text as UTF-8), creating its parent directories. */
  async writeFile(path: string, data: string | Uint8Array): Promise<void> {
    await this.call("PUT", `/files/${filePath(path)}`, { body: enc(data), headers: { "Content-Type": "application/octet-stream" } });
  }

  /** A directory's entries ("": /workspace itself). */
  async listDir(path = ""): Promise<FileInfo[]> {
    const p = path.replace(/^\/+|\/+$/g, "") ? `/files/${filePath(path)}` : "/files";
    const res = await this.client.t.open("GET", this.p + p);
    const b = await readAll(res);
    if (header(res, "X-Patina-File-Type") !== "dir") throw new InvalidError(`${path} is not a directory`, "invalid", 400);
    return JSON.parse(new TextDecoder().decode(b)) as FileInfo[];
  }

  /** Removes a file, or a directory and everything in it. */
  async deleteFile(path: string): Promise<void> {
    await this.call("DELETE", `/files/${filePath(path)}`);
  }

  /** Whether a file or directory exists at `path`. */
  async exists(path: string): Promise<boolean> {
    try {
      await this.call("HEAD", `/files/${filePath(path)}`);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  /** Copies a local directory tree's regular files into the workspace under `remoteDir`; returns how many. */
  async upload(localDir: string, remoteDir = ""): Promise<number> {
    let n = 0;
    for (const e of await readdir(localDir, { withFileTypes: true })) {
      const remote = [remoteDir.replace(/^\/+|\/+$/g, ""), e.name].filter(Boolean).join("/");
      if (e.isDirectory()) n += await this.upload(join(localDir, e.name), remote);
      else if (e.isFile()) {
        await this.writeFile(remote, await readFile(join(localDir, e.name)));
        n++;
      }
    }
    return n;
  }

  /** Copies a directory tree of the workspace's regular files to `localDir` (created); returns how many. */
  async download(remoteDir: string, localDir: string): Promise<number> {
    let n = 0;
    await mkdir(localDir, { recursive: true });
    for (const e of await this.listDir(remoteDir)) {
      if (!e.name || e.name === "." || e.name === ".." || e.name.includes("/") || e.name.includes(sep)) {
        throw new InvalidError(`the workspace listed a bad name ${JSON.stringify(e.name)}`, "invalid", 0);
      }
      const remote = [remoteDir.replace(/^\/+|\/+$/g, ""), e.name].filter(Boolean).join("/");
      if (e.type === "dir") n += await this.download(remote, join(localDir, e.name));
      else if (e.type === "file") {
        await fsWriteFile(join(localDir, e.name), await this.readFile(remote));
        n++;
      }
    }
    return n;
  }

  // Git.

  /** Its changes against its base; the sidecar remembers what it showed: merge() takes exactly it. */
  diff(): Promise<Diff> {
    return this.call("GET", "/diff");
  }

  /** Commits everything uncommitted and records it on the branch patina/<name> of your repository. */
  commit(message: string, o: { authorName?: string; authorEmail?: string } = {}): Promise<CommitResult> {
    const body: Record<string, string> = { message };
    if (o.authorName || o.authorEmail) Object.assign(body, { author_name: o.authorName, author_email: o.authorEmail });
    return this.call("POST", "/commit", { json: body });
  }

  /**
   * Merges exactly one commit into `into` (default: the branch it came
   * from): `commit`, else the one the last diff() showed. ConflictError when
   * nothing was reviewed, the workspace changed since (look again), the
   * diff held uncommitted work (commit first), or the merge conflicts.
   */
  merge(o: { commit?: string; into?: string } = {}): Promise<MergeResult> {
    const body: Record<string, string> = {};
    if (o.commit) body.commit = o.commit;
    if (o.into) body.into = o.into;
    return this.call("POST", "/merge", { json: body });
  }

  /** Stages its changes, squashed, in your working tree (not committed). */
  apply(): Promise<ApplyResult> {
    return this.call("POST", "/apply");
  }

  /** Its log: created, commands, committed, merged, stopped... */
  log(): Promise<LogEntry[]> {
    return this.call("GET", "/log");
  }

  // Ports.

  /** Makes `port` inside the workspace reachable on the sidecar's host (`url`, `address`). NotListeningError when nothing listens. */
  forwardPort(port: number, hostPort?: number): Promise<PortForward> {
    return this.call("POST", "/ports", { json: hostPort ? { port, host_port: hostPort } : { port } });
  }

  /** Its forwarded ports, read now (the field `ports` is as of the last refresh). */
  async listPorts(): Promise<PortForward[]> {
    return (await this.call<{ ports: PortForward[] }>("GET", "/ports")).ports;
  }

  /** Stops forwarding `port` (its connections are closed). */
  async closePort(port: number): Promise<void> {
    await this.call("DELETE", `/ports/${Math.trunc(port)}`);
  }
}

/**
 * A persistent bash shell in a workspace. One command at a time (BusyError
 * otherwise); sessions run in parallel.
 */
export class Session {
  constructor(readonly workspace: Workspace, readonly id: string, public info?: SessionInfo) {}

  /** @internal */
  get p(): string {
    return `/sessions/${seg(this.id)}`;
  }

  /** @internal */
  call<T>(method: string, path = "", o: Parameters<Transport["call"]>[2] = {}): Promise<T> {
    return this.workspace.call<T>(method, this.p + path, o);
  }

  /** Its state now (status, cwd, the command it runs). */
  async refresh(): Promise<SessionInfo> {
    const info = await this.call<SessionInfo>("GET");
    this.info = info;
    return info;
  }

  /** Ends the shell and every process it started, and removes it. */
  async delete(): Promise<void> {
    await this.call("DELETE");
  }

  /** Exports `env` (and unsets `unset`) in the shell. */
  async setEnv(env: Record<string, string>, unset?: string[]): Promise<SessionInfo> {
    const info = await this.call<SessionInfo>("POST", "/env", { json: unset?.length ? { env, unset } : { env } });
    this.info = info;
    return info;
  }

  /**
   * Runs bash text in the shell and waits for it. `timeoutMs` stops it
   * (timed_out; the shell keeps its state); `stdin` is its input (none:
   * EOF). A failing command is not an error: look at exit_code. Throws
   * BusyError while another runs, EndedError once the shell has ended.
   */
  exec(command: string, o: ExecOptions = {}): Promise<ExecResult> {
    return this.call("POST", "/exec", { json: execBody(command, o), timeoutMs: 0 });
  }

  /** Starts a command in the background and returns it at once. */
  async start(command: string, o: ExecOptions = {}): Promise<Command> {
    const r = await this.call<{ command_id: string }>("POST", "/exec", { json: { ...execBody(command, o), async: true } });
    return new Command(this, r.command_id);
  }

  /**
   * Runs a command and yields its output as it is written:
   *
   * ```ts
   * const s = session.stream("make test");
   * for await (const chunk of s) process.stdout.write(chunk.data);
   * console.log(s.result?.exit_code);
   * ```
   * Leaving the loop early stops the command.
   */
  stream(command: string, o: ExecOptions = {}): ExecStream {
    return new ExecStream(this, execBody(command, o));
  }

  /** Every command the session ran, oldest first. */
  history(): Promise<CommandInfo[]> {
    return this.call("GET", "/commands");
  }

  /** A command of the session by id. */
  command(id: string): Command {
    return new Command(this, id);
  }

  /**
   * An interactive terminal in the session (a WebSocket): it starts from
   * the session's state and hands its state back when it ends; meanwhile
   * exec throws BusyError.
   */
  terminal(o: { rows?: number; cols?: number; term?: string; offset?: number } = {}): Promise<Terminal> {
    const t = this.workspace.client.t;
    const path = t.path(`/v1/workspaces/${seg(this.workspace.id)}${this.p}/terminal`, {
      rows: o.rows ?? 24, cols: o.cols ?? 80, term: o.term, offset: o.offset || undefined,
    });
    return Terminal.open(t, path);
  }
}

/** A streamed command's output; once exhausted, `result` is its result (output fields empty: the output came as chunks). */
export class ExecStream implements AsyncIterable<OutputChunk> {
  result: ExecResult | undefined;
  commandId = "";

  constructor(private readonly session: Session, private readonly body: Record<string, unknown>) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<OutputChunk> {
    const res = await this.session.workspace.client.t.open("POST", `/v1/workspaces/${seg(this.session.workspace.id)}${this.session.p}/exec`, {
      json: this.body, headers: { Accept: "text/event-stream" }, timeoutMs: 0,
    });
    this.commandId = header(res, "X-Patina-Command-Id");
    const dec = new TextDecoder();
    let pending = "";
    let event = "";
    let data: string[] = [];
    try {
      for await (const chunk of res) {
        pending += dec.decode(chunk, { stream: true });
        let nl;
        while ((nl = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, nl).replace(/\r$/, "");
          pending = pending.slice(nl + 1);
          if (line === "") {
            if (event) {
              const out = this.event(event, data.join("\n"));
              if (out) yield out;
            }
            event = "";
            data = [];
          } else if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
      }
    } finally {
      res.destroy();
    }
    if (!this.result) throw new PatinaError("the exec stream ended without the command's result");
  }

  private event(event: string, raw: string): OutputChunk | undefined {
    const d = raw ? (JSON.parse(raw) as Record<string, any>) : {};
    if (event === "stdout" || event === "stderr") {
      const bytes = d.data_base64 ? Buffer.from(d.data_base64, "base64") : enc(d.data ?? "");
      return { stream: event, data: bytes, offset: d.offset ?? 0, text: new TextDecoder().decode(bytes) };
    }
    if (event === "exit") this.result = d.result as ExecResult;
    else if (event === "error") throw new PatinaError(String(d.data ?? "the command's result could not be had"), "internal", 500);
    return undefined;
  }

  /** Reads the rest of the output and returns the result. */
  async wait(): Promise<ExecResult> {
    for await (const _ of this) {
      // discard
    }
    return this.result as ExecResult;
  }
}

/** A command of a session by id: its record, its output by offset or followed, a signal, a wait. */
export class Command {
  constructor(readonly session: Session, readonly id: string) {}

  private get p(): string {
    return `/commands/${seg(this.id)}`;
  }

  /** Its record: state running, finished or lost; exit_code; sizes. */
  info(): Promise<CommandInfo> {
    return this.session.call("GET", this.p);
  }

  /** Its output (stdout or stderr) from byte `offset` to the current end. */
  async read(stream: "stdout" | "stderr" = "stdout", offset = 0): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    for await (const c of this.follow(stream, offset, false)) parts.push(c);
    return Buffer.concat(parts);
  }

  /** Yields its output from `offset` as it is written, until it finishes. */
  async *follow(stream: "stdout" | "stderr" = "stdout", offset = 0, follow = true): AsyncGenerator<Uint8Array> {
    const ws = this.session.workspace;
    const res = await ws.client.t.open("GET", `/v1/workspaces/${seg(ws.id)}${this.session.p}${this.p}/${stream}`, {
      query: { offset, follow: follow ? "1" : undefined }, timeoutMs: 0,
    });
    try {
      for await (const chunk of res) yield chunk;
    } finally {
      res.destroy();
    }
  }

  /** Sends INT, TERM, KILL, HUP, QUIT (these stop it as a timeout does), USR1 or USR2. NotRunningError once finished. */
  async signal(signal = "INT"): Promise<void> {
    await this.session.call("POST", `${this.p}/signal`, { json: { signal } });
  }

  /** Waits until it finishes (at most timeoutMs: then an Error) and returns its record. */
  async wait(o: { timeoutMs?: number } = {}): Promise<CommandInfo> {
    const deadline = o.timeoutMs === undefined ? undefined : Date.now() + o.timeoutMs;
    let pause = 20;
    for (;;) {
      const info = await this.info();
      if (info.state !== "running") return info;
      if (deadline === undefined) {
        try {
          // Following from far past the end returns when it finishes.
          for await (const _ of this.follow("stdout", 2 ** 62)) {
            // nothing comes
          }
        } catch (e) {
          if (!(e instanceof InvalidError)) throw e; // it finished meanwhile
        }
        continue;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`command ${this.id} still runs after ${o.timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, Math.min(pause, left)));
      pause = Math.min(pause * 2, 500);
    }
  }
}
