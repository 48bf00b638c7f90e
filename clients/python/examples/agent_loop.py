#!/usr/bin/env python3
"""An agent loop with patina: run the tests in a workspace, read the
failure, edit a file, run them again (streaming their output), review the
diff, commit, and merge exactly what was reviewed into your branch.

    python3 examples/agent_loop.py --repo /path/to/repo [--test "bash test.sh"]

The sidecar is found as the patina CLI finds it (PATINA_ADDR and
PATINA_TOKEN, else its state directory). `propose_fix` stands in for the
model: a real agent sends the failure and the file to its LLM there.
"""

import argparse
import re
import sys
import uuid

import patina


def propose_fix(failure: str, source: str) -> str:
    """A stand-in for an LLM: given the test failure and the file's text,
    return the file's new text. This one knows a single trick: a function
    the failure names that subtracts where it should add."""
    m = re.search(r"FAIL: (\w+)", failure)
    if not m:
        return source
    fn = m.group(1)
    return re.sub(r"(%s\(\) \{[^}]*?)\$\(\(\s*\$1\s*-\s*\$2\s*\)\)" % fn, r"\1$(( $1 + $2 ))", source)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True, help="a git repository on the sidecar's machine")
    ap.add_argument("--test", default="bash test.sh", help="the test command")
    ap.add_argument("--file", default="calc.sh", help="the file the agent may edit")
    ap.add_argument("--attempts", type=int, default=3)
    args = ap.parse_args()

    client = patina.Client()
    ws = client.create_workspace(name="agent-" + uuid.uuid4().hex[:8], repo=args.repo)
    print("workspace %s on branch %s" % (ws.name, ws.branch))
    try:
        sh = ws.session("default")
        result = sh.exec(args.test, timeout=300)
        for attempt in range(1, args.attempts + 1):
            if result.exit_code == 0:
                break
            failure = result.stdout + result.stderr
            print("attempt %d: tests failed (exit %d):\n%s" % (attempt, result.exit_code, failure.strip()))
            source = ws.read_text(args.file)
            fixed = propose_fix(failure, source)
            if fixed == source:
                print("the model has no fix to offer")
                return 1
            ws.write_file(args.file, fixed)
            # Run them again, showing their output as it comes.
            stream = sh.stream(args.test, timeout=300)
            out = []
            for chunk in stream:
                sys.stdout.write(chunk.text)
                out.append(chunk)
            assert stream.result is not None
            result = stream.result
            result.stdout = "".join(c.text for c in out if c.stream == "stdout")
            result.stderr = "".join(c.text for c in out if c.stream == "stderr")
        if result.exit_code != 0:
            print("still failing after %d attempts" % args.attempts)
            return 1

        diff = ws.diff()
        print("the change to review:\n" + diff.text)
        print("files: " + ", ".join("%s (+%d -%d)" % (f.path, f.added, f.deleted) for f in diff.files))
        commit = ws.commit("Fix %s (the tests pass)" % args.file)
        print("committed %s (reviewed: %s)" % (commit.commit[:10], commit.reviewed))
        merged = ws.merge()
        print("merged %s into %s (fast-forward: %s)" % (merged.merged[:10], merged.into, merged.fast_forward))
        return 0
    finally:
        ws.delete()


if __name__ == "__main__":
    sys.exit(main())
