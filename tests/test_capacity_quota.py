"""CKafka's per-broker quota allocation, case by case from its rules in docs/kafka-behaviour.md."""

from __future__ import annotations

import pytest

from app.capacity.model import CapacityError
from app.capacity.quota import BrokerLoad, allocate


def test_quiet_brokers_get_their_base_share_by_partitions():
    # F_b = L * partitions_b / total: 100 * 1/4 and 100 * 3/4; traffic below 80 % of both.
    got = allocate(100, {0: BrokerLoad(1, 10), 1: BrokerLoad(3, 50)})
    assert got.allocation_mbps == pytest.approx({0: 25, 1: 75}) and got.rule == "base share"


def test_even_traffic_is_shared_proportionally():
    # 45 >= 0.8 * 50 so rule 3 fails; shares 45/(45+40) and 40/85, ratio 0.89 >= 0.8.
    got = allocate(100, {0: BrokerLoad(1, 45), 1: BrokerLoad(1, 40)})
    assert got.allocation_mbps == pytest.approx({0: 100 * 45 / 85, 1: 100 * 40 / 85})
    assert got.rule == "proportional"


def test_uneven_traffic_gives_quiet_brokers_ten_percent_headroom():
    # Shares 0.6 and 0.4, ratio 0.67 < 0.8: busiest 60, other min(0.4 + 0.06, 0.6) * 100 = 46.
    got = allocate(100, {0: BrokerLoad(1, 60), 1: BrokerLoad(1, 40)})
    assert got.allocation_mbps == pytest.approx({0: 60, 1: 46}) and got.rule == "busiest plus headroom"


def test_headroom_is_capped_at_the_busiest_share():
    # Shares 50/108, 48/108, 10/108: broker 1 would get 48/108 + 5/108 > 50/108, so it is capped.
    got = allocate(108, {0: BrokerLoad(1, 50), 1: BrokerLoad(1, 48), 2: BrokerLoad(1, 10)})
    assert got.allocation_mbps == pytest.approx({0: 50, 1: 50, 2: 15})


def test_full_storage_blocks_producing():
    assert allocate(100, {0: BrokerLoad(1, 1)}, storage_full=True).produce_blocked
    assert not allocate(100, {0: BrokerLoad(1, 1)}).produce_blocked


@pytest.mark.parametrize(
    ("limit", "brokers"),
    [(0, {0: BrokerLoad(1, 1)}), (10, {}), (10, {0: BrokerLoad(1, -5)}), (10, {0: BrokerLoad(0, 1)})],
)
def test_bad_input_is_rejected(limit, brokers):
    with pytest.raises(CapacityError):
        allocate(limit, brokers)
