"""Disk, page cache and broker count for a demand, worked by hand from Kafka's storage behaviour."""

from __future__ import annotations

import pytest

from app.capacity.model import GIB, MIB, CapacityError, Hardware
from app.capacity.sizing import Demand, grow, size

# 10 MiB/s of 100-byte messages is 10 MiB * 122/100 = 12.2 MiB/s on the wire and on disk.
DEMAND = Demand(ingress_mbps=10, replication_factor=3, partitions=6, retention_hours=24, read_behind_s=600)
WIRE = 10 * MIB * 1.22


def test_disk_for_retention_and_replication():
    # A day of 12.2 MiB/s, three copies, plus one 1 GiB segment per partition replica awaiting deletion.
    assert size(Hardware(), DEMAND).disk_bytes == pytest.approx(WIRE * 86_400 * 3 + 6 * 3 * GIB)


def test_page_cache_for_read_behind():
    # Ten minutes of everything written (all replicas), spread over 3 brokers.
    sized = size(Hardware(), DEMAND)
    assert sized.page_cache_bytes == pytest.approx(WIRE * 3 * 600)
    assert sized.as_dict()["page_cache_gb_per_broker"] == pytest.approx(WIRE * 600 / 1e9, abs=0.01)


def test_broker_count_never_below_replication_factor():
    tiny = Demand(ingress_mbps=0.01, replication_factor=3, retention_hours=1, partitions=1)
    sized = size(Hardware(), tiny)
    assert sized.brokers_needed == 3 and sized.binding == "replication factor"


def test_network_bound_demand_needs_brokers_with_headroom():
    # 200 MiB/s in, RF 3: 200 * 1.22 * 3 MiB/s arrives; a 1 GbE broker carries 125e6 * 1448/1538 bytes/s,
    # usable up to 70 % (82.4e6): ceil(767.6e6 / 82.4e6) = ceil(9.32) = 10 brokers.
    heavy = Demand(ingress_mbps=200, replication_factor=3, retention_hours=1, partitions=60, read_behind_s=1)
    sized = size(Hardware(disk_tb=100), heavy)
    assert sized.binding == "NIC in" and sized.brokers_needed == 10


def test_growth_scales_traffic_and_can_raise_the_broker_count():
    heavy = Demand(ingress_mbps=200, replication_factor=3, retention_hours=1, partitions=60, read_behind_s=1)
    grown = grow(heavy, 50)
    assert grown.ingress_mbps == pytest.approx(300)
    assert size(Hardware(disk_tb=100), grown).brokers_needed == 14  # ceil(1151.3e6 / 82.4e6) = ceil(13.98)


@pytest.mark.parametrize(
    ("kwargs", "field"), [({"headroom": 1.0}, "headroom"), ({"ingress_mbps": -1}, "ingress_mbps")]
)
def test_bad_demand_names_the_field(kwargs, field):
    with pytest.raises(CapacityError) as err:
        Demand(**kwargs)
    assert err.value.field == field
