"""`eventcloud subscribe` run as a real process, with the JSON lines it printed (tests, chaos runs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import trio

__all__ = ["CliSubscriber"]


class CliSubscriber:
    """One `eventcloud subscribe … --format jsonl` process: its parsed stdout lines and its stderr."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.args, self.env = args, env or {}
        self.lines: list[dict] = []
        self.stderr = b""
        self.proc: trio.Process | None = None

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Start the process (`nursery.start(sub.run)`) and read its output until it ends."""
        command = [sys.executable, "-m", "eventcloud", "subscribe", *self.args]
        self.proc = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                     env={**os.environ, **self.env})
        task_status.started()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._errors)
            buffer = b""
            async for chunk in self.proc.stdout:
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                self.lines += [json.loads(line) for line in complete if line.strip()]
        await self.proc.wait()

    async def _errors(self) -> None:
        async for chunk in self.proc.stderr:
            self.stderr += chunk

    @property
    def notifications(self) -> list[dict]:
        return [line for line in self.lines if "seq" in line]

    def kill(self) -> None:
        """kill -9: whatever it had not printed yet is the overlay's to keep."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)

    async def first_line(self, timeout: float = 60) -> dict:
        with trio.fail_after(timeout):
            while not self.lines:
                await trio.sleep(0.05)
        return self.lines[0]
