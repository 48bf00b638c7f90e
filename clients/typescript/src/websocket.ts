// A minimal WebSocket client (RFC 6455) over node:http's upgrade, for
// terminals: Node 18 has no global WebSocket. Client frames are masked;
// messages are bounded.
import * as http from "node:http";
import * as https from "node:https";
import { createHash, randomBytes } from "node:crypto";
import { errorFrom, PatinaConnectionError, PatinaError } from "./errors.js";
import { readAll, Transport } from "./http.js";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const MAX_MESSAGE = 16 << 20;

export interface Message {
  binary: boolean;
  data: Uint8Array;
}

/** The peer closed the WebSocket; `closeCode` 1000 is a normal close. */
export class WebSocketClosed extends PatinaError {
  readonly closeCode: number;
  constructor(message: string, closeCode: number) {
    super(message, "closed", 0);
    this.closeCode = closeCode;
  }
}

export class WebSocketConn {
  private buf: Uint8Array = new Uint8Array(0);
  private fragments: Uint8Array[] = [];
  private fragmentBinary = false;
  private queue: Message[] = [];
  private waiting: ((v: void) => void)[] = [];
  private ended: WebSocketClosed | null = null;
  private closed = false;

  private constructor(private readonly socket: http.Socket, head: Uint8Array) {
    socket.setNoDelay(true);
    socket.on("data", (chunk) => this.onData(chunk));
    socket.on("close", () => this.finish(new WebSocketClosed("the connection was cut without a close", 1006)));
    socket.on("error", () => this.finish(new WebSocketClosed("the connection failed", 1006)));
    if (head.length) this.onData(head);
  }

  static async connect(t: Transport, path: string): Promise<WebSocketConn> {
    await t.verify();
    const key = Buffer.from(randomBytes(16)).toString("base64");
    const req = (t.url.protocol === "https:" ? https : http).request({
      protocol: t.url.protocol,
      hostname: t.url.hostname.replace(/^\[|\]$/g, ""),
      port: Number(t.url.port) || (t.url.protocol === "https:" ? 443 : 80),
      path,
      method: "GET",
      headers: t.headers({
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Key": key,
        "Sec-WebSocket-Version": "13",
      }),
    });
    return new Promise((resolve, reject) => {
      req.on("error", (err) => reject(new PatinaConnectionError(`cannot reach the patina sidecar at ${t.base}: ${err.message}`, "connection", 0)));
      req.on("response", (res) => {
        readAll(res, 1 << 20).then((b) => reject(errorFrom(res.statusCode ?? 0, b)), reject);
      });
      req.on("upgrade", (res, socket, head) => {
        const want = createHash("sha1").update(key + GUID).digest("base64");
        const got = res.headers["sec-websocket-accept"];
        if (got !== want) {
          socket.destroy();
          reject(new PatinaError("the WebSocket handshake's answer is not for this request"));
          return;
        }
        resolve(new WebSocketConn(socket, head));
      });
      req.end();
    });
  }

  private finish(err: WebSocketClosed): void {
    if (!this.ended) this.ended = err;
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiting.splice(0)) w();
  }

  private onData(chunk: Uint8Array): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    for (;;) {
      const b = this.buf;
      if (b.length < 2) return;
      const fin = (b[0] & 0x80) !== 0;
      const opcode = b[0] & 0x0f;
      const masked = (b[1] & 0x80) !== 0;
      let n = b[1] & 0x7f;
      let off = 2;
      if (n === 126) {
        if (b.length < 4) return;
        n = (b[2] << 8) | b[3];
        off = 4;
      } else if (n === 127) {
        if (b.length < 10) return;
        n = Number(new DataView(b.buffer, b.byteOffset + 2, 8).getBigUint64(0));
        off = 10;
      }
      if (n > MAX_MESSAGE) {
        this.close(1009);
        this.finish(new WebSocketClosed(`a WebSocket frame of ${n} bytes is over the limit`, 1009));
        return;
      }
      const maskLen = masked ? 4 : 0;
      if (b.length < off + maskLen + n) return;
      let data = b.slice(off + maskLen, off + maskLen + n);
      if (masked) data = xor(data, b.slice(off, off + 4));
      this.buf = b.slice(off + maskLen + n);
      this.frame(fin, opcode, data);
    }
  }

  private frame(fin: boolean, opcode: number, data: Uint8Array): void {
    switch (opcode) {
      case 0x9: // ping
        this.send(0xa, data);
        return;
      case 0xa: // pong
        return;
      case 0x8: { // close
        const code = data.length >= 2 ? (data[0] << 8) | data[1] : 1005;
        if (!this.closed) {
          this.closed = true;
          try {
            this.send(0x8, data.slice(0, 2), true);
          } catch {
            // the socket is gone already
          }
        }
        this.socket.end();
        this.finish(new WebSocketClosed(new TextDecoder().decode(data.slice(2)) || "closed", code));
        return;
      }
      case 0x1:
      case 0x2:
        this.fragments = [data];
        this.fragmentBinary = opcode === 0x2;
        break;
      case 0x0:
        this.fragments.push(data);
        break;
      default:
        this.close(1002);
        return;
    }
    if (fin) {
      const whole = this.fragments.length === 1 ? this.fragments[0] : Buffer.concat(this.fragments);
      this.fragments = [];
      this.queue.push({ binary: this.fragmentBinary, data: whole });
      this.wake();
    }
  }

  /** The next message; rejects with WebSocketClosed once the peer closed. */
  async recv(): Promise<Message> {
    for (;;) {
      const m = this.queue.shift();
      if (m) return m;
      if (this.ended) throw this.ended;
      await new Promise<void>((r) => this.waiting.push(r));
    }
  }

  private send(opcode: number, data: Uint8Array, force = false): void {
    if (this.closed && !force) throw new WebSocketClosed("the WebSocket is closed", 1000);
    const n = data.length;
    let head: number[];
    if (n < 126) head = [0x80 | opcode, 0x80 | n];
    else if (n < 65536) head = [0x80 | opcode, 0x80 | 126, n >> 8, n & 0xff];
    else {
      head = [0x80 | opcode, 0x80 | 127];
      for (let i = 7; i >= 0; i--) head.push(Math.floor(n / 2 ** (8 * i)) & 0xff);
    }
    const mask = randomBytes(4);
    this.socket.write(Buffer.concat([Uint8Array.from(head), mask, xor(data, mask)]));
  }

  sendBinary(data: Uint8Array): void {
    this.send(0x2, data);
  }

  sendText(text: string): void {
    this.send(0x1, new TextEncoder().encode(text));
  }

  /** Closes the connection (a close frame first). */
  close(code = 1000): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.send(0x8, Uint8Array.from([code >> 8, code & 0xff]), true);
    } catch {
      // the socket is gone already
    }
    this.socket.end();
  }
}

function xor(data: Uint8Array, mask: Uint8Array): Uint8Array {
  const out = new Uint8Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = data[i] ^ mask[i & 3];
  return out;
}
