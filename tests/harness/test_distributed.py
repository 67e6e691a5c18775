"""Splitting a run over workers (maslab.harness.distributed): shares that add up to the whole, the
endpoints table each worker slot uses, and shards."""

from __future__ import annotations

import pytest

from maslab.harness.distributed import (
    SHARD_SAMPLES,
    plan_shards,
    share,
    split_endpoints,
    usable_slots,
)
from maslab.llm.endpoints import endpoints_table


@pytest.mark.parametrize("total", [1, 2, 3, 7, 64, 65])
@pytest.mark.parametrize("slots", [1, 2, 3, 5])
def test_shares_add_up_to_the_whole_and_differ_by_at_most_one(total, slots):
    parts = [share(total, s, slots) for s in range(slots)]
    assert sum(parts) == total
    assert max(parts) - min(parts) <= 1


def test_each_slot_gets_its_share_of_every_endpoint_limit():
    table = endpoints_table(
        {
            "m": [
                {"base_url": "http://a:1/v1", "max_concurrency": 5, "rpm": 90},
                {"base_url": "http://b:1/v1"},  # no limits: the run's concurrency caps it
            ]
        }
    )
    slots = [split_endpoints(table, s, 2)["m"] for s in range(2)]
    assert [part[0].max_concurrency for part in slots] == [3, 2]
    assert [part[0].rpm for part in slots] == [45, 45]
    assert all(part[1].max_concurrency is None and part[1].rpm is None for part in slots)
    assert table["m"][0].max_concurrency == 5  # the driver's table is left whole
    assert split_endpoints(None, 0, 2) is None


def test_no_slot_gets_a_share_of_nothing():
    table = endpoints_table({"m": [{"base_url": "http://a:1/v1", "max_concurrency": 3}]})
    assert usable_slots(8, 64, table) == 3
    assert usable_slots(8, 2, None) == 2
    assert usable_slots(2, 64, None) == 2


def test_shards_deal_every_sample_once():
    samples = list(range(10))
    shards = plan_shards(samples, 3, workers=2)
    assert shards == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert plan_shards(samples, None, workers=2) == [samples[0::2], samples[1::2]]
    assert plan_shards(samples, 50, workers=2) == [[i] for i in samples]  # never an empty shard
    assert plan_shards([], None, workers=2) == []
    big = list(range(3 * SHARD_SAMPLES))
    assert len(plan_shards(big, None, workers=2)) == 3  # none over SHARD_SAMPLES
