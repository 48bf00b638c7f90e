"""The asyncio flavour."""

import asyncio

import pytest

import patina
import patina.aio


def test_async_flow(client, name):
    async def main():
        ac = patina.aio.AsyncClient(client.url, client._t.token)
        ws = await ac.create_workspace(name=name)
        try:
            sh = await ws.session("default")
            r = await sh.exec("echo hi")
            assert r.stdout == "hi\n"
            # Two sessions at once.
            a, b = await ws.session("a"), await ws.session("b")
            ra, rb = await asyncio.gather(a.exec("sleep 0.5; echo a"), b.exec("sleep 0.5; echo b"))
            assert (ra.stdout, rb.stdout) == ("a\n", "b\n")
            stream = sh.stream("echo one; echo two >&2")
            chunks = [c async for c in stream]
            assert b"one\n" in b"".join(c.data for c in chunks if c.stream == "stdout")
            assert stream.result is not None and stream.result.exit_code == 0
            cmd = await sh.start("sleep 0.2; echo later")
            assert b"".join([c async for c in cmd.follow()]) == b"later\n"
            assert (await cmd.wait()).exit_code == 0
            await ws.write_file("x.txt", "x")
            assert await ws.read_text("x.txt") == "x"
            with pytest.raises(patina.NotFoundError):
                await ac.workspace(name + "-missing")
        finally:
            await ws.delete()

    asyncio.run(main())
