import { PatinaError } from "./errors.js";
import { Transport } from "./http.js";
import { WebSocketClosed, WebSocketConn } from "./websocket.js";

/** The server's first message: where the output that follows starts. */
export interface TerminalHello {
  type: "hello";
  session?: string;
  offset: number;
  started?: boolean;
  resumed?: boolean;
}

/** The terminal's end. */
export interface TerminalExit {
  type: "exit";
  exit_code?: number;
  reason?: string;
}

/** Output, or the exit. */
export type TerminalEvent = { output: Uint8Array; exit?: undefined } | { output?: undefined; exit: TerminalExit };

/**
 * An interactive terminal in a session (vim, a REPL, Ctrl-C, resizes) over
 * a WebSocket. `hello` says where the output starts; read with `next()` or
 * `for await (const bytes of terminal)`; type with `write()`; `resize()`;
 * `end()` hangs it up (its shell hands its state back to the session);
 * `close()` detaches, leaving it running for 60 s, to reconnect with
 * `session.terminal({ offset: terminal.offset })`.
 */
export class Terminal {
  exitCode: number | undefined;
  /** Bytes of output received. */
  received = 0;

  private constructor(private readonly ws: WebSocketConn, readonly hello: TerminalHello) {}

  /** @internal */
  static async open(t: Transport, path: string): Promise<Terminal> {
    const ws = await WebSocketConn.connect(t, path);
    const m = await ws.recv();
    const hello = m.binary ? undefined : (JSON.parse(new TextDecoder().decode(m.data)) as TerminalHello);
    if (!hello || hello.type !== "hello") {
      ws.close();
      throw new PatinaError("the terminal sent no hello");
    }
    return new Terminal(ws, hello);
  }

  /** Where to reconnect: the hello's offset plus the bytes received. */
  get offset(): number {
    return this.hello.offset + this.received;
  }

  /** The next output or the exit; undefined once the terminal has ended. */
  async next(): Promise<TerminalEvent | undefined> {
    let m;
    try {
      m = await this.ws.recv();
    } catch (e) {
      if (e instanceof WebSocketClosed && e.closeCode === 1000) return undefined;
      throw e;
    }
    if (m.binary) {
      this.received += m.data.length;
      return { output: m.data };
    }
    const msg = JSON.parse(new TextDecoder().decode(m.data)) as TerminalExit;
    if (msg.type !== "exit") throw new PatinaError(`unexpected terminal message ${new TextDecoder().decode(m.data).slice(0, 100)}`);
    this.exitCode = msg.exit_code;
    return { exit: msg };
  }

  /** Output until the terminal exits (`exitCode` is then set). */
  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    for (;;) {
      const ev = await this.next();
      if (!ev || ev.exit) return;
      yield ev.output;
    }
  }

  /** Reads output until it holds `needle`; returns all of it as text. */
  async readUntil(needle: string, limit = 1 << 20): Promise<string> {
    let text = "";
    const dec = new TextDecoder();
    for await (const out of this) {
      text += dec.decode(out, { stream: true });
      if (text.includes(needle) || text.length > limit) break;
    }
    return text;
  }

  /** Types `data` ("ls\r": Enter is a carriage return). */
  write(data: string | Uint8Array): void {
    this.ws.sendBinary(typeof data === "string" ? new TextEncoder().encode(data) : data);
  }

  resize(rows: number, cols: number): void {
    this.ws.sendText(JSON.stringify({ type: "resize", rows, cols }));
  }

  /** Hangs the terminal up; the rest of its output and its exit follow. */
  end(): void {
    this.ws.sendText(JSON.stringify({ type: "end" }));
  }

  /** Detaches (the terminal stays for a reconnect within 60 s). */
  close(): void {
    this.ws.close(1001);
  }
}
