"""Test doubles that are real parts run in-process: a memory network, a whole overlay, an RPC pair."""

from eventcloud.testing.memory import MemoryNetwork
from eventcloud.testing.overlay import Overlay, open_overlay, trio_ms
from eventcloud.testing.rpc_pair import RpcPair, open_rpc_pair

__all__ = ["MemoryNetwork", "Overlay", "open_overlay", "trio_ms", "RpcPair", "open_rpc_pair"]
