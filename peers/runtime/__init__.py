"""TODO docstring for peers.runtime."""

from peers.runtime.peer_runtime import RunningPeer, run_peer
from peers.runtime.task_dump import describe_peer, dump_tasks, serve_task_dumps

__all__ = ["RunningPeer", "describe_peer", "dump_tasks", "run_peer", "serve_task_dumps"]
