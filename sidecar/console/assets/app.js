// patina console. It talks only to the public /v1 API, with a browser key
// (from POST /console/signin) as its bearer; the key lives in this tab's
// sessionStorage. Every text from the API is set as text, never as HTML.
"use strict";

const KEY = "patina.key";
let key = sessionStorage.getItem(KEY) || "";
let stopView = () => {}; // ends the current view's streams

// ---- small helpers ----

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "on") for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
    else if (k === "class") e.className = v;
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}
const $ = (sel) => document.querySelector(sel);
const main = () => $("#main");
// fill replaces e's children with kids (arrays flattened, nulls left out).
function fill(e, ...kids) { e.replaceChildren(...kids.flat(2).filter((k) => k !== null && k !== undefined && k !== "")); }
function show(...kids) { fill(main(), ...kids); }
function crumbs(...kids) { $("#crumbs").replaceChildren(...kids); }
const enc = encodeURIComponent;

function ago(t) {
  if (!t) return "";
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 60) return Math.round(s) + "s ago";
  if (s < 3600) return Math.round(s / 60) + "m ago";
  if (s < 86400) return Math.round(s / 3600) + "h ago";
  return Math.round(s / 86400) + "d ago";
}
function dur(a, b) {
  if (!a || !b) return "";
  const ms = new Date(b) - new Date(a);
  return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
}
function bytes(n) { return n < 1024 ? n + " B" : n < 1 << 20 ? (n / 1024).toFixed(1) + " KiB" : (n / 1048576).toFixed(1) + " MiB"; }

class APIError extends Error {
  constructor(status, body) { super((body && body.error) || "HTTP " + status); this.status = status; this.code = body && body.code; }
}

async function api(method, path, body, opts) {
  const headers = { Authorization: "Bearer " + key };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch("/v1" + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: opts && opts.signal });
  if (r.status === 401) { signOut("Your sign-in ended: sign in again."); throw new APIError(401, { error: "signed out" }); }
  if (opts && opts.raw) { if (!r.ok) throw new APIError(r.status, await r.json().catch(() => null)); return r; }
  const data = r.status === 204 ? null : await r.json().catch(() => null);
  if (!r.ok) throw new APIError(r.status, data);
  return data;
}

// stream reads a streamed response chunk by chunk until signal aborts.
async function stream(path, signal, onChunk) {
  const r = await api("GET", path, undefined, { raw: true, signal });
  const rd = r.body.getReader();
  for (;;) {
    const { value, done } = await rd.read();
    if (done) return;
    onChunk(value);
  }
}

// events follows GET /v1/events (server-sent events over fetch: an
// EventSource cannot send the bearer), reconnecting after a second.
function events(query, signal, onEvent) {
  const run = async () => {
    while (!signal.aborted) {
      try {
        let buf = "";
        const dec = new TextDecoder();
        $("#live").textContent = "live";
        await stream("/events" + query, signal, (chunk) => {
          buf += dec.decode(chunk, { stream: true });
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i); buf = buf.slice(i + 2);
            let type = "message", data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) type = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
            }
            if (data) onEvent(type, JSON.parse(data));
          }
        });
      } catch (e) {
        if (signal.aborted) return;
      }
      $("#live").textContent = "reconnecting…";
      await new Promise((r) => setTimeout(r, 1000));
    }
  };
  run();
}

function errorBox(e) { return el("p", { class: "error", "data-test": "error" }, e.message || String(e)); }

// ---- sign-in ----

async function signIn(body) {
  const r = await fetch("/console/signin", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const data = await r.json().catch(() => null);
  if (!r.ok) throw new Error((data && data.error) || "sign-in refused");
  key = data.key;
  sessionStorage.setItem(KEY, key);
}

function signOut(msg) {
  if (key) fetch("/console/signout", { method: "POST", headers: { Authorization: "Bearer " + key } }).catch(() => {});
  key = "";
  sessionStorage.removeItem(KEY);
  stopView();
  showSignIn(msg);
}

function showSignIn(msg) {
  $("#signout").hidden = true;
  crumbs();
  $("#live").textContent = "";
  show($("#signin-tpl").content.cloneNode(true));
  if (msg) $("#signin-error").textContent = msg;
  $("#signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await signIn({ token: $("#signin-token").value.trim() });
      location.hash = "#/";
      route();
    } catch (e) { $("#signin-error").textContent = e.message; }
  });
}

// ---- views ----

function wsState(w) {
  if (w.status === "stopped" && /idle/i.test(w.error || "")) return "idle-stopped";
  return w.status;
}

function viewWorkspaces(signal) {
  crumbs(el("span", {}, "workspaces"));
  const rows = new Map();
  const body = el("tbody", { id: "ws-rows" });
  const msg = el("p", { class: "error" });
  const act = (fn) => async () => { msg.textContent = ""; try { await fn(); } catch (e) { msg.textContent = e.message; } };
  const render = (w) => {
    const name = w.name;
    const tr = el("tr", { "data-ws": name },
      el("td", {}, el("a", { href: "#/ws/" + enc(name) }, name), w.fork_of ? el("div", { class: "muted" }, "fork") : null),
      el("td", { class: "state-" + wsState(w), "data-test": "state" }, wsState(w), w.error ? el("div", { class: "muted" }, w.error) : null),
      el("td", { class: "mono" }, w.image),
      el("td", {}, w.repo ? el("span", {}, w.repo, el("div", { class: "mono muted" }, w.branch)) : el("span", { class: "muted" }, "scratch")),
      el("td", {}, w.memory_mb + " MB, " + w.cpus + " CPU, " + w.pids_limit + " pids" + (w.disk_mb ? ", " + w.disk_mb + " MB disk" : "")),
      el("td", {}, (w.network && w.network.mode) || "", w.network && w.network.allow ? el("div", { class: "muted" }, w.network.allow.join(", ")) : null),
      el("td", {}, w.agent ? String(w.agent.restarts) : "", w.agent && w.agent.last_restart_reason ? el("div", { class: "muted" }, w.agent.last_restart_reason) : null),
      el("td", {}, ago(w.created_at)),
      el("td", {}, ago(w.last_activity)),
      el("td", {},
        w.status === "running"
          ? el("button", { on: { click: act(() => api("POST", "/workspaces/" + enc(name) + "/stop")) } }, "stop")
          : el("button", { on: { click: act(() => api("POST", "/workspaces/" + enc(name) + "/start")) } }, "start"),
        el("button", { on: { click: act(() => api("POST", "/workspaces/" + enc(name) + "/fork", {})) } }, "fork"),
        el("button", { on: { click: act(() => confirm("Delete workspace " + name + "?") && api("DELETE", "/workspaces/" + enc(name))) } }, "delete")));
    const old = rows.get(w.id);
    if (old) old.replaceWith(tr); else body.append(tr);
    rows.set(w.id, tr);
  };
  const nameIn = el("input", { type: "text", placeholder: "name (optional)", id: "create-name" });
  const repoIn = el("input", { type: "text", placeholder: "repository path on the sidecar's machine (optional)", size: 40 });
  show(
    el("h1", {}, "Workspaces"),
    el("form", { class: "inline", on: { submit: (ev) => { ev.preventDefault(); act(() => api("POST", "/workspaces", { name: nameIn.value || undefined, repo: repoIn.value || undefined }))(); } } },
      nameIn, repoIn, el("button", { type: "submit" }, "create")),
    msg,
    el("table", {}, el("thead", {}, el("tr", {}, ["name", "state", "image", "repository", "limits", "network", "agent restarts", "age", "last activity", ""].map((h) => el("th", {}, h)))), body));
  events("", signal, (type, data) => {
    if (type === "snapshot") { body.replaceChildren(); rows.clear(); data.forEach(render); }
    else if (type === "workspace") render(data);
    else if (type === "workspace_deleted") { const tr = rows.get(data.id); if (tr) tr.remove(); rows.delete(data.id); }
  });
}

function tabs(name, on) {
  const t = (id, label, href) => el("a", { href, class: id === on ? "on" : "", "data-tab": id }, label);
  const b = "#/ws/" + enc(name);
  crumbs(el("a", { href: "#/" }, "workspaces"), " / ", el("span", {}, name));
  return el("nav", { class: "tabs" }, t("ws", "sessions", b), t("review", "review", b + "/review"), t("terminal", "terminal", b + "/terminal"), t("ports", "ports", b + "/ports"), t("log", "event log", b + "/log"));
}

// decodeOut shows output as text, or says it is binary.
function decodeOut(buf) {
  try { return { text: new TextDecoder("utf-8", { fatal: true }).decode(buf) }; }
  catch (e) { return { binary: true, text: "binary output, " + bytes(buf.length) + ": " + Array.from(buf.slice(0, 64), (b) => b.toString(16).padStart(2, "0")).join(" ") + (buf.length > 64 ? " …" : "") }; }
}

function viewWorkspace(name, signal) {
  const base = "/workspaces/" + enc(name);
  const head = el("div", {});
  const sessions = el("div", { id: "sessions" });
  const outBox = el("div", { id: "output" });
  show(tabs(name, "ws"), head, sessions, outBox);
  const following = new Set();

  const showOutput = async (sid, c) => {
    const path = base + "/sessions/" + enc(sid) + "/commands/" + enc(c.id);
    const offIn = el("input", { type: "number", min: 0, value: 0, style: undefined });
    const pre = el("pre", { "data-test": "output" });
    const load = async () => {
      const parts = [];
      for (const s of ["stdout", "stderr"]) {
        const r = await api("GET", path + "/" + s + "?offset=" + Number(offIn.value || 0), undefined, { raw: true });
        const d = decodeOut(new Uint8Array(await r.arrayBuffer()));
        parts.push(el("div", {}, el("strong", {}, s), el("pre", { class: d.binary ? "binary" : "" }, d.text)));
      }
      pre.replaceChildren(...parts);
    };
    outBox.replaceChildren(el("h2", {}, "Output of ", el("code", {}, c.command)),
      el("form", { class: "inline", on: { submit: (ev) => { ev.preventDefault(); load().catch((e) => pre.replaceChildren(errorBox(e))); } } }, "from byte ", offIn, el("button", {}, "read")), pre);
    await load();
  };

  // follow streams a running command's stdout into the page.
  const follow = (sid, cid, command) => {
    if (following.has(cid)) return;
    following.add(cid);
    const pre = el("pre", { "data-test": "live-output", "data-cid": cid });
    const box = el("div", { class: "running" }, el("h2", {}, "Running in ", sid, ": ", el("code", {}, command)), pre);
    outBox.prepend(box);
    const dec = new TextDecoder();
    stream(base + "/sessions/" + enc(sid) + "/commands/" + enc(cid) + "/stdout?follow=1", signal, (chunk) => { pre.textContent += dec.decode(chunk, { stream: true }); })
      .catch(() => {}).finally(() => { box.querySelector("h2").firstChild.textContent = "Ran in "; });
  };

  const render = async (list) => {
    const w = await api("GET", base);
    head.replaceChildren(el("p", {}, el("span", { class: "state-" + wsState(w) }, wsState(w)), " · ", el("span", { class: "mono" }, w.image), w.branch ? " · " + w.branch : "", " · created ", ago(w.created_at)));
    const parts = [];
    for (const s of list) {
      const hist = await api("GET", base + "/sessions/" + enc(s.id) + "/commands");
      const cmds = (hist.commands || hist || []).slice(-50).reverse();
      parts.push(el("h2", {}, "Session ", el("code", {}, s.id), " ", el("span", { class: "muted" }, s.status + " · cwd " + s.cwd)),
        el("table", { "data-session": s.id }, el("thead", {}, el("tr", {}, ["command", "exit", "duration", "stdout", "stderr", "started"].map((h) => el("th", {}, h)))),
          el("tbody", {}, cmds.map((c) => el("tr", { class: "cmd", "data-cid": c.id, on: { click: () => showOutput(s.id, c).catch((e) => outBox.replaceChildren(errorBox(e))) } },
            el("td", { class: "mono" }, c.command), el("td", {}, c.exit_code === undefined ? c.state : String(c.exit_code)), el("td", {}, dur(c.started_at, c.ended_at)),
            el("td", {}, bytes(c.stdout_bytes)), el("td", {}, bytes(c.stderr_bytes)), el("td", {}, ago(c.started_at)))))));
      if (s.running) {
        const c = cmds.find((x) => x.id === s.running);
        follow(s.id, s.running, c ? c.command : s.running);
      }
    }
    if (!list.length) parts.push(el("p", { class: "muted" }, "No sessions yet."));
    sessions.replaceChildren(...parts);
  };
  events("?workspace=" + enc(name), signal, (type, data) => {
    if (type === "sessions") render(data).catch((e) => sessions.replaceChildren(errorBox(e)));
  });
}

function renderDiff(text) {
  const files = [];
  let cur = null;
  for (const line of text.split("\n")) {
    if (line.startsWith("diff --git ")) { cur = { head: line.slice(11), lines: [] }; files.push(cur); continue; }
    if (cur) cur.lines.push(line);
  }
  return files.map((f) => {
    const meta = f.lines.filter((l) => /^(rename|new file|deleted file|similarity|Binary files)/.test(l));
    const pre = el("pre", {});
    for (const l of f.lines) {
      if (/^(index |--- |\+\+\+ |rename |similarity |new file|deleted file)/.test(l)) continue;
      const cls = l.startsWith("@@") ? "hunk" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : "";
      pre.append(cls ? el("span", { class: cls }, l) : l + "\n");
    }
    return el("div", { class: "file", "data-file": f.head }, el("h3", {}, f.head, meta.length ? el("div", { class: "muted" }, meta.join(" · ")) : null), pre);
  });
}

function viewReview(name) {
  const base = "/workspaces/" + enc(name);
  const box = el("div", {});
  const msg = el("p", {});
  show(tabs(name, "review"), msg, box);
  const load = async () => {
    const d = await api("GET", base + "/diff");
    const message = el("input", { type: "text", placeholder: "commit message", size: 50, id: "commit-message" });
    const commitForm = el("form", { class: "inline", on: { submit: async (ev) => {
      ev.preventDefault();
      try { const r = await api("POST", base + "/commit", { message: message.value }); msg.textContent = r.committed ? "Committed " + r.commit.slice(0, 12) : "Nothing to commit"; await load(); }
      catch (e) { msg.replaceChildren(errorBox(e)); }
    } } }, message, el("button", { type: "submit", id: "commit" }, "commit"));
    const merge = el("button", { id: "merge", on: { click: async () => {
      try { const r = await api("POST", base + "/merge", { commit: d.commit }); msg.replaceChildren(el("span", { "data-test": "merged" }, "Merged " + d.commit.slice(0, 12) + " into " + (r.into || "its branch") + (r.commit ? " (now " + r.commit.slice(0, 12) + ")" : ""))); }
      catch (e) { msg.replaceChildren(errorBox(e)); }
    } } }, "merge exactly ", d.commit ? d.commit.slice(0, 12) : "");
    fill(box,
      el("p", {}, "Shows commit ", el("code", { id: "diff-commit" }, d.commit || "(none)"), " against ", el("code", {}, (d.base || "").slice(0, 12)),
        d.uncommitted ? el("strong", {}, " · uncommitted work: commit it to merge it") : ""),
      el("table", {}, el("tbody", {}, (d.files || []).map((f) => el("tr", {}, el("td", { class: "mono" }, f.old_path && f.old_path !== f.path ? f.old_path + " → " + f.path : f.path),
        el("td", {}, f.binary ? "binary" : "+" + (f.added || 0) + " −" + (f.deleted || 0)))))),
      commitForm, d.commit && !d.uncommitted ? merge : null,
      renderDiff(d.text || ""), d.truncated ? el("p", { class: "muted" }, "The diff is cut here (too large).") : null);
  };
  load().catch((e) => box.replaceChildren(errorBox(e)));
}

function viewLog(name) {
  const box = el("div", {});
  show(tabs(name, "log"), box);
  api("GET", "/workspaces/" + enc(name) + "/log").then((evs) => {
    const list = evs.events || evs || [];
    box.replaceChildren(el("table", {}, el("tbody", {}, list.slice().reverse().map((e) => el("tr", {}, el("td", {}, ago(e.time || e.at)), el("td", {}, e.kind || e.type || ""), el("td", { class: "mono" }, e.message || JSON.stringify(e)))))));
  }).catch((e) => box.replaceChildren(errorBox(e)));
}

function viewPorts(name, signal) {
  const base = "/workspaces/" + enc(name);
  const list = el("div", { id: "ports" });
  const port = el("input", { type: "number", min: 1, max: 65535, placeholder: "port", id: "forward-port" });
  const msg = el("p", {});
  const load = async () => {
    const p = await api("GET", base + "/ports");
    list.replaceChildren(el("table", {}, el("tbody", {}, (p.ports || []).map((f) => el("tr", {},
      el("td", {}, el("a", { href: "/preview/" + enc(name) + "/" + f.port + "/", target: "_blank", rel: "noopener noreferrer", "data-port": f.port }, "port " + f.port)),
      el("td", { class: "mono muted" }, f.address), el("td", {}, f.connections + " connections"),
      el("td", {}, el("button", { on: { click: () => api("DELETE", base + "/ports/" + f.port).then(load).catch((e) => msg.replaceChildren(errorBox(e))) } }, "close")))))));
  };
  show(tabs(name, "ports"),
    el("form", { class: "inline", on: { submit: (ev) => { ev.preventDefault(); api("POST", base + "/ports", { port: Number(port.value) }).then(() => { msg.textContent = ""; return load(); }).catch((e) => msg.replaceChildren(errorBox(e))); } } },
      port, el("button", { type: "submit" }, "forward")), msg, list);
  load().catch((e) => list.replaceChildren(errorBox(e)));
}

function viewTerminal(name, sid, signal) {
  const base = "/workspaces/" + enc(name);
  const box = el("div", { id: "term" });
  const status = el("p", { class: "muted", id: "term-status" });
  const pick = el("select", { id: "term-session" });
  show(tabs(name, "terminal"), el("p", {}, "Session ", pick, " ", el("button", { id: "term-close", on: { click: () => closeTerm(true) } }, "close (hand the session back)")), status, box);
  api("GET", base + "/sessions").then((list) => {
    const ids = (list.sessions || list || []).map((s) => s.id);
    if (!ids.includes(sid)) ids.unshift(sid);
    pick.replaceChildren(...ids.map((id) => el("option", { value: id, selected: id === sid }, id)));
  }).catch(() => {});
  pick.addEventListener("change", () => { location.hash = "#/ws/" + enc(name) + "/terminal/" + enc(pick.value); });
  if (window.XTERM_MISSING || !window.Terminal) {
    status.replaceChildren(el("span", { class: "error", "data-test": "xterm-missing" }, window.XTERM_MISSING || "xterm.js is not installed on the sidecar's machine (apt-get install node-xterm libjs-xterm)"));
    return;
  }
  const term = new window.Terminal({ cursorBlink: true, scrollback: 5000 });
  term.open(box);
  if (term.fit) term.fit();
  let ws = null, pos = 0, ended = false, tries = 0;
  const send = (m) => { if (ws && ws.readyState === 1) ws.send(m); };
  const connect = () => {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const q = "?rows=" + term.rows + "&cols=" + term.cols + "&offset=" + pos + "&token=" + enc(key);
    ws = new WebSocket(proto + "//" + location.host + "/v1" + base + "/sessions/" + enc(sid) + "/terminal" + q);
    ws.binaryType = "arraybuffer";
    const dec = new TextDecoder();
    ws.onmessage = (m) => {
      if (typeof m.data === "string") {
        const msg = JSON.parse(m.data);
        if (msg.type === "hello") { pos = msg.offset || 0; tries = 0; status.textContent = "attached to " + sid + (msg.resumed ? " (resumed)" : ""); box.dataset.attached = "1"; }
        if (msg.type === "exit") { ended = true; status.textContent = "the session's shell ended (exit " + msg.exit_code + ")"; }
        return;
      }
      const b = new Uint8Array(m.data);
      pos += b.length;
      term.write(dec.decode(b, { stream: true }));
    };
    ws.onclose = (ev) => {
      delete box.dataset.attached;
      if (ended || signal.aborted) return;
      if (ev.code === 1000 || tries > 20) { status.textContent = "closed: " + (ev.reason || "the terminal ended"); return; }
      tries++;
      status.textContent = "reconnecting…";
      setTimeout(connect, 500 * Math.min(tries, 6));
    };
  };
  term.on("data", (d) => send(new TextEncoder().encode(d)));
  term.on("resize", (s) => send(JSON.stringify({ type: "resize", rows: s.rows, cols: s.cols })));
  const onResize = () => { if (term.fit) term.fit(); };
  window.addEventListener("resize", onResize);
  const closeTerm = (handBack) => {
    ended = true;
    if (handBack) send(JSON.stringify({ type: "end" }));
    setTimeout(() => { if (ws) ws.close(); }, 100);
    status.textContent = "closed: the session is the agent's again";
  };
  signal.addEventListener("abort", () => { window.removeEventListener("resize", onResize); if (!ended) closeTerm(true); term.destroy(); });
  connect();
  term.focus();
}

// ---- routing ----

function route() {
  stopView();
  const ctl = new AbortController();
  stopView = () => ctl.abort();
  const h = location.hash;
  if (h.startsWith("#code=")) return; // handled at start
  if (!key) return showSignIn();
  $("#signout").hidden = false;
  const p = h.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (p[0] !== "ws" || !p[1]) return viewWorkspaces(ctl.signal);
  switch (p[2] || "") {
    case "review": return viewReview(p[1]);
    case "terminal": return viewTerminal(p[1], p[3] || "default", ctl.signal);
    case "ports": return viewPorts(p[1], ctl.signal);
    case "log": return viewLog(p[1]);
    default: return viewWorkspace(p[1], ctl.signal);
  }
}

window.addEventListener("hashchange", route);
$("#signout").addEventListener("click", () => signOut());
// start signs in with a one-time code from `patina ui` if the fragment
// holds one (the browser never sends a fragment: it is exchanged once,
// then wiped), then shows the view.
async function start() {
  const m = location.hash.match(/^#code=([0-9a-f]+)$/);
  if (m) {
    history.replaceState(null, "", location.pathname + "#/");
    try { await signIn({ code: m[1] }); } catch (e) { return showSignIn(e.message); }
  }
  route();
}
window.addEventListener("hashchange", () => { if (location.hash.startsWith("#code=")) start(); });
start();
