"""A write's result awaited on the event loop, with no thread held while the worker works.

:func:`outcome` is :meth:`WriteHandle.wait` for async code (the HTTP API's write
handlers, the MCP server's write tools). They publish a write in a thread (a short
blocking call that ends with :meth:`WriteHandle.poll_only`), then await its result here:

- each poll reads the write's receipt (:meth:`WriteHandle.done`: one statement on one
  row by its key in the orchestrator's SQLite file, in WAL mode, where a reader never
  waits for the writer). It stays on the loop: it costs a few hundredths of a
  millisecond (``benchmarks/api_write_wait.py`` measures it), less than a hop to a
  thread and back. The first read in the loop's thread opens that thread's connection
  to the file, once per orchestrator (a few milliseconds);
- the pause between polls is a quarter of the time waited so far, from 5 ms up to
  100 ms and never past the deadline: a write is seen at most about a quarter of its
  own time late, and a long wait costs ten polls a second;
- the result store (Redis: a network round trip, so in a thread of ``limiter``'s pool)
  is asked once the receipt is final, at least every 100 ms besides (a task can end
  without a final receipt: a damaged database, an unexpected error), and at the
  deadline; its result is read as soon as it is there.

The answer is ``wait``'s: the task's result, or None when it did not come in time.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread

from orchmem.worker.client.handles import WriteHandle

#: The shortest and the longest pause between two polls of a receipt.
FIRST_PAUSE_S = 0.005
LONGEST_PAUSE_S = 0.1
#: Each pause, as a share of the time waited so far.
PAUSE_SHARE = 0.25


async def outcome(handle: WriteHandle, timeout: float,
                  limiter: anyio.CapacityLimiter | None = None) -> dict[str, Any] | None:
    """The task's result (as ``handle.wait(timeout)`` gives it), or None when it did not
    come within ``timeout`` seconds; no thread is held between polls."""
    if not handle.ok:
        return None
    start = anyio.current_time()
    deadline = start + timeout
    asked = start  # when the result store was last asked
    while True:
        now = anyio.current_time()
        if handle.done() or now - asked >= LONGEST_PAUSE_S or now >= deadline:
            asked = now
            ready, value = await anyio.to_thread.run_sync(handle.result_now, limiter=limiter)
            if ready:
                return value
            now = anyio.current_time()
        if now >= deadline:
            return None
        pause = min(max(FIRST_PAUSE_S, (now - start) * PAUSE_SHARE), LONGEST_PAUSE_S)
        await anyio.sleep(min(pause, deadline - now))
