"""The throughput model against LinkedIn's published 2014 figures (docs/kafka-behaviour.md) and first
principles."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.capacity.model import MIB, REFERENCE_FACTOR, CapacityError, CpuCosts, Hardware, Workload, throughput

LINKEDIN = Hardware()  # 3 brokers, 6 cores at 2.5 GHz, 6 disks ~822 MB/s, 32 GB RAM, 1 GbE
REF = Workload(message_bytes=100, batch_bytes=8196, acks="1", partitions=6, producers=1, consumers=1)


def within(model: float, published: float, factor: float = REFERENCE_FACTOR) -> bool:
    return published / factor <= model <= published * factor


def test_linkedin_hardware_is_the_default_profile():
    assert (LINKEDIN.brokers, LINKEDIN.cores, LINKEDIN.clock_ghz, LINKEDIN.ram_gb, LINKEDIN.nic_gbps) == (
        3,
        6,
        2.5,
        32.0,
        1.0,
    )
    assert LINKEDIN.disk_bytes_per_s / MIB == pytest.approx(822, rel=0.01)


@pytest.mark.parametrize(
    ("replication_factor", "records_per_s", "mb_per_s"),
    [(1, 821_557, 78.3), (3, 786_980, 75.1)],  # single producer thread, acks=1
)
def test_producer_matches_linkedin(replication_factor, records_per_s, mb_per_s):
    result = throughput(LINKEDIN, replace(REF, replication_factor=replication_factor))
    assert within(result.produce.records_per_s, records_per_s)
    assert within(result.mb_per_s(result.produce.records_per_s), mb_per_s)


def test_consumer_matches_linkedin():
    result = throughput(LINKEDIN, replace(REF, replication_factor=3))
    assert within(result.consume.records_per_s, 940_521)
    assert within(result.mb_per_s(result.consume.records_per_s), 89.7)


def test_replication_never_speeds_producing_up():
    rf1 = throughput(LINKEDIN, REF).produce.records_per_s
    rf3 = throughput(LINKEDIN, replace(REF, replication_factor=3)).produce.records_per_s
    assert rf3 <= rf1


def test_records_fall_and_megabytes_rise_as_messages_grow():
    sizes = [10, 100, 1000, 10_000, 100_000]
    results = [throughput(LINKEDIN, replace(REF, message_bytes=m)) for m in sizes]
    records = [r.produce.records_per_s for r in results]
    mb = [r.mb_per_s(r.produce.records_per_s) for r in results]
    assert records == sorted(records, reverse=True) and len(set(records)) == len(records)
    assert mb == sorted(mb) and len(set(mb)) == len(mb)


def test_small_messages_are_cpu_bound_and_large_ones_network_bound():
    # LinkedIn 2014's message-size runs (batch 128000): "with 10-byte messages the CPU is the limit ... not
    # the network. From about 100 bytes the network saturates"
    sweep = replace(REF, batch_bytes=128_000, replication_factor=3)
    tiny = throughput(LINKEDIN, replace(sweep, message_bytes=10))
    assert tiny.produce.kind == "cpu"
    network = min(b.records_per_s for b in tiny.produce_bounds if b.kind == "network")
    assert network > 3 * tiny.produce.records_per_s
    for size in (100, 1000, 10_000):
        answer = throughput(LINKEDIN, replace(sweep, message_bytes=size))
        network = min(b.records_per_s for b in answer.produce_bounds if b.kind == "network")
        assert network <= 1.1 * answer.produce.records_per_s, size


def test_acks_all_costs_a_single_producer_as_the_published_runs_show():
    # AlphaHinex 2022 (Kafka 2.4.1, default batches): acks=all 335,629 vs acks=1 615,558 records/s, 0.545x;
    # LinkedIn 2014: 421,823 vs 786,980, 0.536x. The model must move the same way, by a similar share.
    rf3 = replace(REF, replication_factor=3, batch_bytes=16_384)
    ratio = (
        throughput(LINKEDIN, replace(rf3, acks="all")).produce.records_per_s
        / throughput(LINKEDIN, rf3).produce.records_per_s
    )
    assert 0.545 / 1.5 <= ratio <= 0.545 * 1.5
    assert throughput(LINKEDIN, replace(rf3, acks="all")).produce.kind == "latency"


def test_tiny_batches_make_the_producer_cpu_bound():
    # Kafka's 2011 paper: 50,000 messages/s in batches of 1 against 400,000 in batches of 50 (200 B)
    tiny = replace(REF, message_bytes=10, acks="0")  # the 2011 producer waited for no acknowledgement
    small, large = (throughput(LINKEDIN, replace(tiny, batch_bytes=b)).produce for b in (64, 128_000))
    assert small.records_per_s < large.records_per_s / 2 and small.kind == "cpu"


def test_lagging_consumers_read_from_disk_once_the_page_cache_is_outrun():
    # 3 brokers with 26 GB of page cache each hold 78 GB of writes; RF 3 at 100 B (122 on disk): a group
    # behind by more than 78e9 / 3 / 1.22 = 21.3 GB of payload reads from disk.
    caught_up = throughput(LINKEDIN, replace(REF, replication_factor=3, backlog_gb=21))
    behind = throughput(LINKEDIN, replace(REF, replication_factor=3, backlog_gb=22))
    assert "broker disk reads" not in {b.name for b in caught_up.consume_bounds}
    disk = {b.name: b.records_per_s for b in behind.consume_bounds}["broker disk reads"]
    assert disk == pytest.approx(3 * 6 * 137 * MIB / 122)


def test_followers_and_a_reading_group_load_the_brokers_nics_out():
    # RF 3 with one group reading along: each record leaves the cluster 3 times (2 followers, 1 group).
    both = throughput(LINKEDIN, replace(REF, replication_factor=3, producers=3, consumers=1))
    out = {b.name: b.records_per_s for b in both.produce_bounds}["broker NIC out to followers, group"]
    assert out == pytest.approx(3 * LINKEDIN.goodput_bytes_per_s / (122 * 3))
    alone = throughput(LINKEDIN, replace(REF, replication_factor=1, consumers=0))
    assert not any("NIC out" in b.name for b in alone.produce_bounds)  # nothing leaves


def test_one_producer_cannot_exceed_its_nic():
    # 1 Gb/s = 125,000,000 bytes/s; 122 bytes per 100-byte message on the wire: at most 1,024,590 records/s.
    assert throughput(LINKEDIN, REF).produce.records_per_s < 125_000_000 / 122


def test_acks_all_adds_a_round_trip_bound_that_can_bind():
    few = replace(REF, partitions=1, batch_bytes=122)
    acks1 = throughput(LINKEDIN, few).produce
    acks_all = throughput(LINKEDIN, replace(few, acks="all", replication_factor=3)).produce
    # One record per request, and the broker serves a connection's requests one at a time (Kafka's protocol
    # guide): records/s = 1 / round trip (0.5 ms), whatever the producer keeps in flight; acks=all waits
    # longer.
    assert acks1.kind == acks_all.kind == "latency"
    assert acks1.records_per_s == pytest.approx(1 / 0.5e-3)
    assert acks_all.records_per_s < acks1.records_per_s
    assert all(b.kind != "latency" for b in throughput(LINKEDIN, replace(few, acks="0")).produce_bounds)


def test_more_brokers_raise_the_broker_bounds():
    many_producers = replace(REF, producers=10, replication_factor=3, partitions=60)
    three = throughput(LINKEDIN, many_producers).produce.records_per_s
    six = throughput(Hardware(brokers=6), many_producers).produce.records_per_s
    assert six == pytest.approx(2 * three)


def test_idle_consumers_beyond_partitions_add_nothing():
    six = throughput(LINKEDIN, replace(REF, consumers=6)).consume.records_per_s
    twelve = throughput(LINKEDIN, replace(REF, consumers=12)).consume.records_per_s
    assert twelve == six


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Hardware(brokers=0), "brokers"),
        (lambda: Hardware(nic_gbps=-1), "nic_gbps"),
        (lambda: Workload(acks="2"), "acks"),
        (lambda: Workload(message_bytes=0), "message_bytes"),
        (lambda: throughput(Hardware(brokers=2), Workload(replication_factor=3)), "replication_factor"),
    ],
)
def test_bad_input_names_the_field(make, field):
    with pytest.raises(CapacityError) as err:
        make()
    assert err.value.field == field


def test_a_producer_only_workload_is_valid_and_consumes_nothing():
    alone = throughput(LINKEDIN, replace(REF, consumers=0))
    assert alone.produce == throughput(LINKEDIN, REF).produce  # consumers never slow producers here
    assert (alone.consume.name, alone.consume.records_per_s) == ("no consumers", 0.0)
    reader = throughput(LINKEDIN, replace(REF, producers=0))
    assert (reader.produce.name, reader.produce.records_per_s) == ("no producers", 0.0)
    with pytest.raises(CapacityError, match="producers: 0 producers and 0 consumers leave nothing"):
        replace(REF, producers=0, consumers=0)


def test_on_one_shared_machine_every_replica_costs_the_same_cores_loopback_and_disk():
    # Everything on one 2-core machine: each record costs the producer's cycles and those of every
    # replica, crosses the loopback and lands on the disk once per replica; a producer thread uses a core.
    laptop = Hardware(cores=2, clock_ghz=2.5, nic_gbps=40, disks=1, disk_mbps=500, shared_machine=True)
    costs = CpuCosts(producer_record=1000, broker_record=1000, byte=0.5, batch=6700)
    rf3 = throughput(laptop, replace(REF, replication_factor=3, producers=3, acks="0"), costs)
    bounds = {b.name: b.records_per_s for b in rf3.produce_bounds}
    # 122 wire bytes at 0.5 cycles = 61; 8196 // 122 = 67 records per batch: 6700 / 67 = 100 per record
    assert bounds["machine CPU"] == pytest.approx(2 * 2.5e9 / ((1000 + 61) + 100 + 3 * (1000 + 61 + 100)))
    assert bounds["producer CPU"] == pytest.approx(3 * 2.5e9 / (1000 + 61))  # the caller's thread paces it
    assert bounds["disk"] == pytest.approx(500 * MIB / (122 * 3))
    assert rf3.produce.name == "machine CPU"
    rf1 = throughput(laptop, replace(REF, replication_factor=1, producers=3, acks="0"), costs)
    assert rf1.produce.records_per_s > rf3.produce.records_per_s  # replicas compete for the same cores
    # The kernel's work per byte is the same cores' too: each replica's copy crosses loopback (2 cycles a
    # byte, both ends) and is written to disk (1 cycle a byte): 3 x 122 x 3 = 1098 cycles more a record.
    kernel = replace(laptop, loopback_cycles_per_byte=2, disk_cycles_per_byte=1)
    rf3_kernel = throughput(kernel, replace(REF, replication_factor=3, producers=3, acks="0"), costs)
    cycles = (1000 + 61) + 100 + 3 * (1000 + 61 + 100) + 1098
    assert rf3_kernel.produce.records_per_s == pytest.approx(2 * 2.5e9 / cycles)


def test_acks_all_waits_for_every_follower():
    one = replace(REF, partitions=1, batch_bytes=122, acks="all")
    waits = {
        rf: {
            b.name: b.records_per_s
            for b in throughput(Hardware(brokers=5), replace(one, replication_factor=rf)).produce_bounds
        }["acks=all wait"]
        for rf in (1, 2, 3, 5)
    }
    acks1 = {b.name: b.records_per_s for b in throughput(LINKEDIN, replace(one, acks="1")).produce_bounds}
    assert waits[1] == acks1["acks=1 wait"]  # RF 1: the in-sync replicas are the leader alone
    assert waits[1] > waits[2] > waits[3] > waits[5]  # the last of more followers comes later


def test_compression_trades_cpu_for_bytes():
    # lz4's README (lzbench, Silesia): lz4 shrinks 2.101x at 780 MB/s, gzip (level 6) 3.099x at 36 MB/s
    kb = replace(REF, message_bytes=1000, batch_bytes=128_000)  # LinkedIn's 1 KB runs: the network binds
    plain, lz4, gzip = (
        throughput(LINKEDIN, replace(kb, compression=c)).produce for c in ("none", "lz4", "gzip")
    )
    assert plain.kind == lz4.kind == "network"  # 1 GbE still binds: lz4 sends 2.101x the records
    assert lz4.records_per_s == pytest.approx(2.101 * plain.records_per_s)
    assert gzip.name == "producer CPU" and gzip.records_per_s < lz4.records_per_s / 5
    tiny = replace(REF, message_bytes=10)  # CPU-bound already: compressing costs records/s
    assert throughput(LINKEDIN, replace(tiny, compression="lz4")).produce.records_per_s < (
        throughput(LINKEDIN, tiny).produce.records_per_s
    )
    mine = throughput(LINKEDIN, replace(kb, compression="lz4", compression_ratio=4.0)).produce
    assert mine.records_per_s > lz4.records_per_s  # a ratio of the user's own data replaces Silesia's


def test_only_the_leader_decompresses_to_validate():
    costs = CpuCosts()
    rf3 = replace(REF, replication_factor=3, compression="zstd")
    extra = costs.brokers(rf3) - 3 * costs.broker(rf3)  # beyond what every replica spends
    assert extra == pytest.approx(4.9e9 / 1380e6 * 122)  # zstd decompresses at 1380 MB/s, once per record
    with pytest.raises(CapacityError, match="compression: must be one of none, lz4"):
        replace(REF, compression="brotli")
    with pytest.raises(CapacityError, match="compression_ratio: applies to a codec"):
        replace(REF, compression_ratio=2.0)


def test_acks_all_on_few_partitions_waits_for_the_followers_fetch_limit():
    # replica.fetch.max.bytes (1 MiB by default): a follower brings at most that of a partition per turn,
    # and its fetcher thread appends those records (R + b x 1022 + K / 1026 cycles each) before it fetches on
    one = replace(REF, message_bytes=1000, batch_bytes=2**20, partitions=1, replication_factor=3, producers=4)
    bounds = {b.name: b.records_per_s for b in throughput(LINKEDIN, replace(one, acks="all")).produce_bounds}
    costs, per_turn = CpuCosts(), 2**20 / 1022
    append_s = per_turn * (costs.broker_record + 1022 + costs.batch / (2**20 // 1022)) / 2.5e9
    assert bounds["followers' fetch"] == pytest.approx(per_turn / (costs.follower_fetch_ms / 1000 + append_s))
    many = throughput(LINKEDIN, replace(one, acks="all", partitions=10)).produce_bounds
    assert {b.name: b.records_per_s for b in many}["followers' fetch"] == pytest.approx(
        10 * bounds["followers' fetch"]
    )
    assert "followers' fetch" not in {b.name for b in throughput(LINKEDIN, one).produce_bounds}  # acks=1
