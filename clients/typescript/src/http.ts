// The HTTP transport over node:http (no runtime dependency; unlike fetch in
// Node 18, no default timeout cuts a long command's answer).
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import { errorFrom, NotSidecarError, PatinaConnectionError } from "./errors.js";

/** Escapes one path segment. */
export const seg = (s: string): string => encodeURIComponent(s);

/** Escapes a file path segment by segment (its "/" stay). */
export const filePath = (p: string): string => p.replace(/^\/+/, "").split("/").map(seg).join("/");

export interface RequestOptions {
  query?: Record<string, string | number | undefined>;
  json?: unknown;
  body?: Uint8Array;
  headers?: Record<string, string>;
  /** Milliseconds until the answer's headers (undefined: none). */
  timeoutMs?: number;
}

const MAX_ERROR_BODY = 1 << 20;

export class Transport {
  readonly url: URL;
  readonly token: string;
  readonly timeoutMs: number | undefined;
  private verified = false;

  constructor(baseUrl: string, token: string, timeoutMs: number | undefined) {
    this.url = new URL(baseUrl);
    if (this.url.protocol !== "http:" && this.url.protocol !== "https:") {
      throw new Error(`patina: the sidecar's URL must be http:// or https://, got ${baseUrl}`);
    }
    this.token = token;
    this.timeoutMs = timeoutMs;
  }

  get base(): string {
    return this.url.origin + this.url.pathname.replace(/\/+$/, "");
  }

  headers(extra?: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { "User-Agent": "patina-client-typescript" };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return { ...h, ...extra };
  }

  path(p: string, query?: RequestOptions["query"]): string {
    let out = this.url.pathname.replace(/\/+$/, "") + p;
    const q = Object.entries(query ?? {}).filter(([, v]) => v !== undefined) as [string, string | number][];
    if (q.length) out += "?" + q.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`).join("&");
    return out;
  }

  /**
   * Makes the server prove it holds the token before the token is sent to
   * it (once): `GET /v1/identify?nonce=N` answers the hex HMAC-SHA256 of
   * "patina identify v1 " + N keyed with the token. After a sidecar dies,
   * another program may listen on its port; it gets nothing. Rejects with
   * NotSidecarError.
   */
  async verify(): Promise<void> {
    if (this.verified || !this.token) return;
    const nonce = Buffer.from(randomBytes(16)).toString("hex");
    const res = await this.send("GET", "/v1/identify", { query: { nonce }, timeoutMs: this.timeoutMs ?? 30_000 }, false);
    const raw = await readAll(res, 4096);
    const want = createHmac("sha256", this.token).update("patina identify v1 " + nonce).digest("hex");
    let proof = "";
    try {
      proof = String((JSON.parse(new TextDecoder().decode(raw)) as { proof?: unknown }).proof ?? "");
    } catch {
      proof = "";
    }
    const ok = (res.statusCode ?? 0) === 200 && proof.length === want.length && timingSafeEqual(Buffer.from(proof, "utf8"), Buffer.from(want, "utf8"));
    if (!ok) {
      throw new NotSidecarError(
        `the server at ${this.base} could not prove it holds the token, so the token was not sent: the token is not that sidecar's, or another program listens there (is \`patina serve\` running?)`,
        "not_sidecar", 0);
    }
    this.verified = true;
  }

  /** Sends a request; resolves to a 2xx answer (whose body the caller reads), rejects with the error of its code. */
  async open(method: string, p: string, o: RequestOptions = {}): Promise<http.IncomingMessage> {
    await this.verify();
    return this.send(method, p, o, true);
  }

  /** open without verify; withToken: send the token. A non-2xx answer is an error only withToken. */
  private send(method: string, p: string, o: RequestOptions, withToken: boolean): Promise<http.IncomingMessage> {
    const headers = withToken ? this.headers(o.headers) : { "User-Agent": "patina-client-typescript", ...o.headers };
    let body: Uint8Array | undefined = o.body;
    if (o.json !== undefined) {
      body = new TextEncoder().encode(JSON.stringify(o.json));
      headers["Content-Type"] = "application/json";
    } else if (body !== undefined) {
      headers["Content-Type"] ??= "application/octet-stream";
    }
    if (body !== undefined) headers["Content-Length"] = String(body.length);
    const req = (this.url.protocol === "https:" ? https : http).request({
      protocol: this.url.protocol,
      hostname: this.url.hostname.replace(/^\[|\]$/g, ""),
      port: Number(this.url.port) || (this.url.protocol === "https:" ? 443 : 80),
      path: this.path(p, o.query),
      method,
      headers,
    });
    return new Promise((resolve, reject) => {
      const timeout = o.timeoutMs === undefined ? this.timeoutMs : o.timeoutMs;
      if (timeout) {
        req.setTimeout(timeout, () => req.destroy(new Error(`no answer within ${timeout} ms`)));
      }
      req.on("error", (err: Error & { code?: string }) => {
        reject(new PatinaConnectionError(
          `cannot reach the patina sidecar at ${this.base}: ${err.message} (is \`patina serve\` running? its address comes from PATINA_ADDR or <state-dir>/sidecar.json)`,
          "connection", 0));
      });
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
        if ((status >= 200 && status < 300) || !withToken) {
          if (timeout) req.setTimeout(0);
          resolve(res);
          return;
        }
        readAll(res, MAX_ERROR_BODY).then((b) => reject(errorFrom(status, b)), reject);
      });
      req.end(body);
    });
  }

  /** Sends a request and returns its JSON answer (undefined when it has none). */
  async call<T>(method: string, p: string, o: RequestOptions = {}): Promise<T> {
    const res = await this.open(method, p, o);
    const b = await readAll(res);
    if (!b.length) return undefined as T;
    return JSON.parse(new TextDecoder().decode(b)) as T;
  }
}

/** Reads a body whole (at most limit bytes). */
export async function readAll(res: http.IncomingMessage, limit = Infinity): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const chunk of res) {
    parts.push(chunk);
    n += chunk.length;
    if (n > limit) {
      res.destroy();
      break;
    }
  }
  return Buffer.concat(parts);
}

export function header(res: http.IncomingMessage, name: string): string {
  const v = res.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] ?? "" : v ?? "";
}
