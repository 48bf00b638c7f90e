#!/usr/bin/env node
// An agent loop with patina: run the tests in a workspace, read the
// failure, edit a file, run them again (streaming their output), review the
// diff, commit, and merge exactly what was reviewed into your branch.
//
//   tsc -p clients/typescript && node clients/typescript/examples/agent-loop.mjs --repo /path/to/repo
//
// The sidecar is found as the patina CLI finds it (PATINA_ADDR and
// PATINA_TOKEN, else its state directory). proposeFix stands in for the
// model: a real agent sends the failure and the file to its LLM there.
import { parseArgs } from "node:util";
import { Client } from "../dist/index.js";

/** A stand-in for an LLM: the file's new text, given the failure and the file. */
function proposeFix(failure, source) {
  const m = /FAIL: (\w+)/.exec(failure);
  if (!m) return source;
  return source.replace(new RegExp(`(${m[1]}\\(\\) \\{[^}]*?)\\$\\(\\(\\s*\\$1\\s*-\\s*\\$2\\s*\\)\\)`), (_, head) => head + "$(( $1 + $2 ))");
}

const { values: args } = parseArgs({
  options: {
    repo: { type: "string" },
    test: { type: "string", default: "bash test.sh" },
    file: { type: "string", default: "calc.sh" },
    attempts: { type: "string", default: "3" },
  },
});
if (!args.repo) {
  console.error("usage: agent-loop.mjs --repo PATH [--test CMD] [--file F]");
  process.exit(2);
}

const client = new Client();
const ws = await client.createWorkspace({ name: "agent-" + Math.random().toString(16).slice(2, 10), repo: args.repo });
console.log(`workspace ${ws.name} on branch ${ws.branch}`);
let code = 1;
try {
  const sh = await ws.session("default");
  let result = await sh.exec(args.test, { timeoutMs: 300_000 });
  for (let attempt = 1; attempt <= Number(args.attempts) && result.exit_code !== 0; attempt++) {
    const failure = result.stdout + result.stderr;
    console.log(`attempt ${attempt}: tests failed (exit ${result.exit_code}):\n${failure.trim()}`);
    const source = await ws.readText(args.file);
    const fixed = proposeFix(failure, source);
    if (fixed === source) throw new Error("the model has no fix to offer");
    await ws.writeFile(args.file, fixed);
    // Run them again, showing their output as it comes.
    const stream = sh.stream(args.test, { timeoutMs: 300_000 });
    let out = "";
    for await (const chunk of stream) {
      process.stdout.write(chunk.data);
      out += chunk.text;
    }
    result = { ...stream.result, stdout: out, stderr: "" };
  }
  if (result.exit_code !== 0) throw new Error(`still failing after ${args.attempts} attempts`);
  const diff = await ws.diff();
  console.log("the change to review:\n" + diff.text);
  console.log("files: " + diff.files.map((f) => `${f.path} (+${f.added} -${f.deleted})`).join(", "));
  const commit = await ws.commit(`Fix ${args.file} (the tests pass)`);
  console.log(`committed ${commit.commit.slice(0, 10)} (reviewed: ${commit.reviewed})`);
  const merged = await ws.merge();
  console.log(`merged ${merged.merged.slice(0, 10)} into ${merged.into} (fast-forward: ${merged.fast_forward})`);
  code = 0;
} catch (e) {
  console.error(String(e?.message ?? e));
} finally {
  await ws.delete();
}
process.exit(code);
