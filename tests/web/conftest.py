"""Fixtures of the gateway's tests: a real local overlay (peer processes, with a cluster secret
and an admin token) shared by a module, and the gateway served in-process on trio (port 0)."""

from __future__ import annotations

import pytest

from peers.supervisor import LocalCluster
from tests.web.support import Served, serve


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # no takeover within 60 s however loaded the machine: a peer stalled past the default 3 s by
    # a loaded CI machine would have its zone taken over and step down, ending the gateway's
    # sessions through it (tests/peers/test_freeze.py tests that behaviour itself)
    with LocalCluster(3, data_dir=tmp_path_factory.mktemp("cluster"), extra=["--failure-timeout", "60"]) as running:
        yield running


@pytest.fixture
async def gateway(nursery, cluster) -> Served:
    return await serve(nursery, [cluster.entry], cluster.admin_token, cors=("http://app.example",))
