import { readFileSync } from "node:fs";

/** The default address of `patina serve`. */
export const DEFAULT_ADDR = "127.0.0.1:7070";

/** PATINA_STATE_DIR, else $XDG_STATE_HOME/patina, else ~/.local/state/patina. */
export function stateDir(env: Record<string, string | undefined>, home: string): string {
  if (env.PATINA_STATE_DIR) return env.PATINA_STATE_DIR;
  if (env.XDG_STATE_HOME) return `${env.XDG_STATE_HOME}/patina`;
  return `${env.HOME || home}/.local/state/patina`;
}

/**
 * The sidecar's base URL and token, found as the patina CLI finds them:
 * the arguments, else PATINA_ADDR and PATINA_TOKEN, else the state
 * directory's sidecar.json and token file, else 127.0.0.1:7070 and no token.
 */
export function resolve(
  url: string | undefined,
  token: string | undefined,
  env: Record<string, string | undefined>,
  home: string,
): { url: string; token: string } {
  const dir = stateDir(env, home);
  let u = url || env.PATINA_ADDR || "";
  if (!u) {
    try {
      const d = JSON.parse(readFileSync(`${dir}/sidecar.json`, "utf8")) as { addr?: unknown };
      if (typeof d.addr === "string") u = d.addr;
    } catch {
      // no running sidecar announced there
    }
  }
  if (!u) u = DEFAULT_ADDR;
  if (!u.includes("://")) u = `http://${u}`;
  let t = token ?? (env.PATINA_TOKEN || undefined);
  if (t === undefined) {
    try {
      t = readFileSync(`${dir}/token`, "utf8").trim();
    } catch {
      t = "";
    }
  }
  return { url: u.replace(/\/+$/, ""), token: t };
}
