"""The trio runtime of one peer: builds its services (docs/architecture.md lists the wiring),
owns every nursery, listens, joins and serves (`run_peer`, `RunningPeer`); what outlives one
runtime of a peer (`lifecycle`); what every task is waiting on (`dump_tasks`, on SIGUSR1).
"""

from peers.runtime.peer_runtime import RunningPeer
from peers.runtime.run_peer import overlay_authority, run_peer
from peers.runtime.task_dump import describe_peer, dump_tasks, serve_task_dumps

__all__ = ["RunningPeer", "describe_peer", "dump_tasks", "overlay_authority", "run_peer", "serve_task_dumps"]
