// The few Node.js (>= 18) APIs the client uses, declared here so that it
// type-checks with TypeScript alone (no @types/node: the client has no
// dependency, not even a development one).

declare module "node:http" {
  export type Headers = Record<string, string | string[] | undefined>;
  export interface IncomingMessage extends AsyncIterable<Uint8Array> {
    statusCode?: number;
    headers: Headers;
    resume(): this;
    destroy(error?: Error): this;
    on(event: "end" | "close", listener: () => void): this;
    on(event: "error", listener: (err: Error) => void): this;
  }
  export interface Socket {
    write(data: Uint8Array): boolean;
    end(): this;
    destroy(): this;
    setNoDelay(noDelay?: boolean): this;
    setTimeout(ms: number): this;
    on(event: "data", listener: (chunk: Uint8Array) => void): this;
    on(event: "close" | "end", listener: () => void): this;
    on(event: "error", listener: (err: Error) => void): this;
  }
  export interface ClientRequest {
    write(data: Uint8Array | string): boolean;
    end(data?: Uint8Array | string): this;
    destroy(error?: Error): this;
    setTimeout(ms: number, callback?: () => void): this;
    on(event: "response", listener: (res: IncomingMessage) => void): this;
    on(event: "upgrade", listener: (res: IncomingMessage, socket: Socket, head: Uint8Array) => void): this;
    on(event: "error", listener: (err: Error) => void): this;
  }
  export interface RequestOptions {
    protocol?: string;
    hostname?: string;
    port?: number;
    path?: string;
    method?: string;
    headers?: Record<string, string>;
  }
  export function request(options: RequestOptions): ClientRequest;
}

declare module "node:https" {
  import { ClientRequest, RequestOptions } from "node:http";
  export function request(options: RequestOptions): ClientRequest;
}

declare module "node:crypto" {
  export function randomBytes(size: number): Uint8Array;
  export function createHash(algorithm: string): {
    update(data: string | Uint8Array): { digest(encoding: "base64"): string };
  };
  export function createHmac(algorithm: string, key: string | Uint8Array): {
    update(data: string | Uint8Array): { digest(encoding: "hex"): string };
  };
  export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean;
}

declare module "node:fs/promises" {
  export interface Dirent {
    name: string;
    isFile(): boolean;
    isDirectory(): boolean;
    isSymbolicLink(): boolean;
  }
  export function readFile(path: string): Promise<Uint8Array>;
  export function readFile(path: string, encoding: "utf8"): Promise<string>;
  export function writeFile(path: string, data: Uint8Array | string): Promise<void>;
  export function mkdir(path: string, options: { recursive: true }): Promise<string | undefined>;
  export function readdir(path: string, options: { withFileTypes: true }): Promise<Dirent[]>;
}

declare module "node:path" {
  export function join(...parts: string[]): string;
  export function resolve(...parts: string[]): string;
  export function relative(from: string, to: string): string;
  export const sep: string;
}

declare module "node:os" {
  export function homedir(): string;
}

declare const process: { env: Record<string, string | undefined> };

interface NodeBuffer extends Uint8Array {
  toString(encoding?: "utf8" | "base64" | "latin1" | "hex"): string;
}
declare const Buffer: {
  from(data: string, encoding: "utf8" | "base64" | "latin1" | "hex"): NodeBuffer;
  from(data: Uint8Array): NodeBuffer;
  concat(list: readonly Uint8Array[]): NodeBuffer;
  alloc(size: number): NodeBuffer;
};

declare module "node:fs" {
  export function readFileSync(path: string, encoding: "utf8"): string;
}
