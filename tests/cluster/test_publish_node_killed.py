"""``warren publish --file`` with the node holding the most leaders killed mid-publish (bench/cluster_publish.py):
the publish finishes with every event stored (exit 0), and every one is delivered, in order per key."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cluster.conftest import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.cluster_publish import publish_kill_run


@pytest.mark.timeout(420)
async def test_a_publish_rides_through_a_node_killed_mid_stream(cluster: Cluster, tmp_path: Path) -> None:
    figures = await publish_kill_run(3000, tmp_path)
    print(json.dumps(figures, indent=2))
    assert figures["publish_exit"] == 0, figures
    assert figures["publish_summary"] == ["published 3000 event(s); 0 not stored; 0 bad line(s)"], figures
    for endpoint in ("ordered", "unordered"):
        assert figures[endpoint]["lost"] == 0, figures
        assert figures[endpoint]["duplicates"] <= 500, figures
    assert figures["ordered"]["order_violations"] == 0, figures
    assert figures["workers_alive"], figures
