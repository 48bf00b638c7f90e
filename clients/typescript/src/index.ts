/**
 * patina: isolated, persistent workspaces for AI coding agents, from
 * TypeScript and JavaScript (Node >= 18, no dependency).
 *
 * ```ts
 * import { Client } from "patina-client";
 * const client = new Client();                 // PATINA_ADDR/PATINA_TOKEN or the state directory
 * const ws = await client.createWorkspace({ name: "fix-login", repo: "/home/me/src/app" });
 * const sh = await ws.session("default");      // a persistent bash shell
 * const r = await sh.exec("make test", { timeoutMs: 600_000 });
 * for await (const c of sh.stream("make test")) process.stdout.write(c.data);
 * await ws.writeFile("src/fix.ts", "...");
 * const d = await ws.diff();                   // review...
 * await ws.commit("Fix the login");            // ...record...
 * await ws.merge();                            // ...merge exactly what was reviewed
 * await ws.delete();
 * ```
 */
export { Client, Command, ExecStream, Session, Workspace, stderrBytes, stdoutBytes } from "./client.js";
export type { ClientOptions } from "./client.js";
export * from "./errors.js";
export { Terminal } from "./terminal.js";
export type { TerminalEvent, TerminalExit, TerminalHello } from "./terminal.js";
export type {
  AgentStatus, ApplyResult, CommandInfo, CommitResult, CreateWorkspaceOptions, Diff, ExecOptions, ExecResult,
  FileInfo, FileStat, LogEntry, MergeResult, OutputChunk, PortForward, SessionInfo, WorkspaceInfo,
} from "./types.js";
export { resolve as resolveConnection, stateDir } from "./config.js";
