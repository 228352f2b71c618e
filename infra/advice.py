"""What an instance's declared load needs, and whether its shape fits it: the
bridge between ``expected_load`` and docs/sizing.md's measured model, so the
shape a user types is checked against the load they declared before deploy.

The model (docs/sizing.md, "The model"): a batch of *n* records on *c* cores
takes ``T = F + n / (c x p)``; a trigger *I* holds *h* times the usual rate *r*
while ``c >= h x r x I / (p x (I - F))``. At or below ``I = F`` batches run back
to back and the job keeps up while ``c x p > h x r``. *F* and *p* are the
measured ones of each compute target: the loaded EMR batch benchmark (F ~ 6 s,
p ~ 6,500 records/s a core) and the serverless sizing run on the Kinesis
source (F ~ 3.0 s, ~2,200 records/s on one executor core, docs/sizing.md
"Serverless shape"). *h* is the instance's stated ``expected_load.headroom``
(a hot hour, or the drain after an outage; docs/sizing.md uses 2).

Pure functions of numbers; :func:`demand_of` and :func:`shape_of` read them
off an instance, :func:`verdict` compares. Synth refuses a shape below its
need (``expected_load.accept_undersized`` with a reason turns it into a
warning) and warns when it is more than :data:`OVERSIZED` times the need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Literal

from infra.cost.lines import EMR_DEFAULT_EBS_GIB, EMR_ROOT_VOLUME_GIB
from infra.cost.prices import HOURS_PER_MONTH, PRICE_ROWS, PriceRow, price_index
from infra.serverless.config import DRIVER_MEMORY_GB, EXECUTOR_MEMORY_GB
from infra.sizing import (
    BATCH_FIXED_SEC,
    INSTANCE_TYPES,
    MASTER_INSTANCE_TYPE,
    RECORDS_PER_CORE_SEC,
    size_executors,
)

if TYPE_CHECKING:
    from infra.config import InstanceConfig

Compute = Literal["emr", "serverless"]

# docs/sizing.md, "Serverless shape": the median batch's fixed cost and one
# executor core's sustained rate, measured on the Kinesis source.
SERVERLESS_FIXED_SEC: Final = 3.0
SERVERLESS_RECORDS_PER_CORE_SEC: Final = 2_200.0
FIXED_SEC: Final[dict[Compute, float]] = {
    "emr": BATCH_FIXED_SEC,
    "serverless": SERVERLESS_FIXED_SEC,
}
PER_CORE: Final[dict[Compute, float]] = {
    "emr": RECORDS_PER_CORE_SEC,
    "serverless": SERVERLESS_RECORDS_PER_CORE_SEC,
}

# A shard takes 1 MiB/s or 1,000 records/s of writes and serves 2 MiB/s of
# reads ("Quotas and limits",
# https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html).
SHARD_WRITE_RECORDS: Final = 1_000
SHARD_WRITE_BYTES: Final = 1024 * 1024
SHARD_READ_BYTES: Final = 2 * 1024 * 1024

# The de-duplication state: about two horizons of ids, 91 bytes each on the
# executors' local disk (docs/sizing.md, "Recommended horizon and state size").
STATE_BYTES_PER_KEY: Final = 91
# Compaction needs room beside the state (same section: "at least twice").
STATE_DISK_FACTOR: Final = 2
SERVERLESS_FREE_DISK_GB: Final = 20  # a worker's disk without extra charge
SERVERLESS_MAX_DISK_GB: Final = 200

# The failure topic's worst hour: every record of the hot rate failing,
# written three times (replication factor 3). Below this a kafka.t3.small
# broker, whose baseline network bandwidth is 0.128 Gbit/s
# (https://docs.aws.amazon.com/ec2/latest/instancetypes/gp.html#gp_network),
# carries it with room to spare; above it the Graviton kafka.m7g.large.
SMALL_BROKER_BYTES_PER_SEC: Final = 4 * 1024 * 1024
SMALL_BROKER: Final = "kafka.t3.small"
LARGE_BROKER: Final = "kafka.m7g.large"
REPLICATION: Final = 3

# More than this many times the need is a warning at synth.
OVERSIZED: Final = 4.0

# The EMR shapes the advice picks from, Graviton only (the release lists m7g
# from xlarge up: infra/sizing.py): a core type and its executor cores.
EMR_CANDIDATES: Final = (("m7g.xlarge", 2), ("m7g.2xlarge", 4))
MAX_CORE_NODES: Final = 40


@dataclass(frozen=True)
class Demand:
    """An instance's declared load at its trigger, on one compute target."""

    compute: Compute
    records_per_sec: float
    record_bytes: int
    headroom: float
    trigger_sec: float
    horizon_hours: float

    @property
    def peak(self) -> float:
        """The rate to hold: ``h x r``."""
        return self.headroom * self.records_per_sec


@dataclass(frozen=True)
class Shape:
    """What an instance has: executor cores, shards (None: on-demand),
    executor disk (GB, serverless only), its own failure cluster's broker type."""

    compute: Compute
    cores: int
    shards: int | None
    executor_disk_gb: int | None = None
    executors: int = 1
    broker: str | None = None
    core_type: str | None = None


@dataclass(frozen=True)
class Need:
    """What the demand needs; ``cores`` is the model's figure, unrounded."""

    cores: float
    shards: int
    state_gb: float
    broker: str
    executor_memory_mb: int
    holds_trigger: bool  # False: the trigger is at or below F, batches run back to back


def cores_needed(demand: Demand) -> float:
    """``h x r x I / (p x (I - F))``; at or below *F*, what keeps up: ``h x r / p``."""
    fixed, per_core = FIXED_SEC[demand.compute], PER_CORE[demand.compute]
    interval = demand.trigger_sec
    if interval <= fixed:
        return demand.peak / per_core
    return demand.peak * interval / (per_core * (interval - fixed))


def shards_needed(records_per_sec: float, record_bytes: int) -> int:
    """The write limits (records and bytes) and the one reader's read limit."""
    written = records_per_sec * record_bytes
    return max(
        1,
        math.ceil(records_per_sec / SHARD_WRITE_RECORDS),
        math.ceil(written / SHARD_WRITE_BYTES),
        math.ceil(written / SHARD_READ_BYTES),
    )


def state_gb(records_per_sec: float, horizon_hours: float) -> float:
    """The de-duplication state on local disk: ``r x 2 x H x 3600`` ids of 91 B."""
    return records_per_sec * 2 * horizon_hours * 3600 * STATE_BYTES_PER_KEY / 1e9


def shortest_trigger(demand: Demand, cores: int) -> float | None:
    """The shortest trigger ``cores`` hold at the peak rate: the *I* with
    ``F + h x r x I / (c x p) = I``; None when they cannot keep up at all."""
    capacity = cores * PER_CORE[demand.compute]
    if capacity <= demand.peak:
        return None
    return FIXED_SEC[demand.compute] / (1 - demand.peak / capacity)


def broker_for(peak: float, record_bytes: int) -> str:
    worst = peak * record_bytes * REPLICATION
    return SMALL_BROKER if worst <= SMALL_BROKER_BYTES_PER_SEC else LARGE_BROKER


def need(demand: Demand) -> Need:
    cores = cores_needed(demand)
    return Need(
        cores=cores,
        shards=shards_needed(demand.peak, demand.record_bytes),
        state_gb=state_gb(demand.records_per_sec, demand.horizon_hours),
        broker=broker_for(demand.peak, demand.record_bytes),
        executor_memory_mb=_advised_emr(cores)[2]
        if demand.compute == "emr"
        else EXECUTOR_MEMORY_GB * 1024,
        holds_trigger=demand.trigger_sec > FIXED_SEC[demand.compute],
    )


# --------------------------------------------------------------------------- shapes


@dataclass(frozen=True)
class Advised:
    """One advised shape on one compute target, and its compute price a month."""

    compute: Compute
    text: str
    monthly_usd: float | None  # None: the region has no price row for it


def _advised_emr(cores: float) -> tuple[str, int, int, int]:
    """The cheapest Graviton core group with at least ``cores`` executor cores:
    (type, nodes, executor memory MB, executor cores)."""
    wanted = max(1, math.ceil(cores))
    best: tuple[float, str, int, int, int] | None = None
    for core_type, executor_cores in EMR_CANDIDATES:
        vcpus, _ = INSTANCE_TYPES[core_type]
        for nodes in range(1, MAX_CORE_NODES + 1):
            sizing = size_executors(core_type, nodes, executor_cores)
            if sizing.instances * sizing.cores >= wanted:
                weight = nodes * vcpus
                if best is None or weight < best[0]:
                    best = (weight, core_type, nodes, sizing.memory_mb, sizing.cores)
                break
    assert best is not None, f"no candidate holds {wanted} cores"
    return best[1], best[2], best[3], best[4]


def advised_emr(cores: float, region: str, rows: tuple[PriceRow, ...] = PRICE_ROWS) -> Advised:
    core_type, nodes, memory_mb, executor_cores = _advised_emr(cores)
    sizing = size_executors(core_type, nodes, executor_cores)
    text = (
        f"emr {nodes} x {core_type} core ({sizing.instances} x {executor_cores}-core "
        f"executors, {memory_mb} MB) + {MASTER_INSTANCE_TYPE} primary"
    )
    index = price_index(rows)
    hourly = 0.0
    for kind, count in ((MASTER_INSTANCE_TYPE, 1), (core_type, nodes)):
        ec2, fee = index.get((f"ec2:{kind}", region)), index.get((f"emr:{kind}", region))
        ebs = index.get(("ebs:gp2", region))
        if ec2 is None or fee is None or ebs is None:
            return Advised("emr", text, None)
        gib = EMR_ROOT_VOLUME_GIB + EMR_DEFAULT_EBS_GIB[kind.split(".", 1)[1]]
        hourly += count * (ec2.usd + fee.usd + gib * ebs.usd / HOURS_PER_MONTH)
    return Advised("emr", text, hourly * HOURS_PER_MONTH)


def serverless_executors(cores: float, state: float) -> tuple[int, int]:
    """1-vCPU executors for ``cores``, and each one's disk (GB) for its share
    of ``state`` GB (twice it, for compaction); more executors when one share
    would not fit the largest disk."""
    executors = max(1, math.ceil(cores))
    while STATE_DISK_FACTOR * state / executors > SERVERLESS_MAX_DISK_GB:
        executors += 1
    disk = max(SERVERLESS_FREE_DISK_GB, math.ceil(STATE_DISK_FACTOR * state / executors))
    return executors, disk


def advised_serverless(
    cores: float, state: float, region: str, rows: tuple[PriceRow, ...] = PRICE_ROWS
) -> Advised:
    executors, disk = serverless_executors(cores, state)
    text = (
        f"serverless ARM64 {executors} x 1 vCPU / {EXECUTOR_MEMORY_GB} GB / {disk} GB "
        f"executor(s) + 1 vCPU / {DRIVER_MEMORY_GB} GB driver"
    )
    index = price_index(rows)
    vcpu = index.get(("emr-serverless:vcpu-arm", region))
    memory = index.get(("emr-serverless:gb-arm", region))
    storage = index.get(("emr-serverless:storage", region))
    if vcpu is None or memory is None or storage is None:
        return Advised("serverless", text, None)
    gigabytes = DRIVER_MEMORY_GB + executors * EXECUTOR_MEMORY_GB
    extra_disk = executors * (disk - SERVERLESS_FREE_DISK_GB)
    hourly = (1 + executors) * vcpu.usd + gigabytes * memory.usd + extra_disk * storage.usd
    return Advised("serverless", text, hourly * HOURS_PER_MONTH)


# --------------------------------------------------------------------------- verdict


@dataclass(frozen=True)
class Verdict:
    """``under``: the shape cannot hold the demand; ``over``: more than
    :data:`OVERSIZED` times it. ``what`` says which part, ``advice`` the shape."""

    kind: Literal["under", "over"]
    what: str
    advice: str


def verdict(demand: Demand, shape: Shape, region: str) -> Verdict | None:
    """None when the shape fits its need within :data:`OVERSIZED` times."""
    found = need(demand)
    wanted = max(1, math.ceil(found.cores))
    under, over = [], []
    if shape.cores < found.cores:
        under.append(f"{shape.cores} executor cores < {found.cores:.2f} needed")
    elif shape.cores > OVERSIZED * wanted:
        over.append(
            f"{shape.cores} executor cores = {shape.cores / wanted:.0f}x the {wanted} needed"
        )
    if shape.shards is not None:
        if shape.shards < found.shards:
            under.append(f"{shape.shards} shard(s) < {found.shards} needed")
        elif shape.shards > OVERSIZED * found.shards:
            over.append(
                f"{shape.shards} shards = {shape.shards / found.shards:.0f}x the "
                f"{found.shards} needed"
            )
    if shape.executor_disk_gb is not None:
        share = STATE_DISK_FACTOR * found.state_gb / shape.executors
        if shape.executor_disk_gb < share:
            under.append(
                f"{shape.executor_disk_gb} GB executor disk < {share:.0f} GB "
                f"(twice its share of {found.state_gb:.0f} GB of state)"
            )
    if shape.broker is not None and shape.broker != found.broker and found.broker == SMALL_BROKER:
        over.append(f"own failure cluster of {shape.broker} where {found.broker} carries it")
    if not under and not over:
        return None
    advice = advice_text(demand, region, own_cluster=shape.broker is not None)
    return Verdict("under" if under else "over", "; ".join(under or over), advice)


def on(demand: Demand, compute: Compute) -> Demand:
    """The same load on the other compute target (its own F and p)."""
    return replace(demand, compute=compute)


def advised(
    demand: Demand, region: str, rows: tuple[PriceRow, ...] = PRICE_ROWS
) -> dict[Compute, Advised]:
    """The advised shape on both compute targets, each from its own measured model."""
    emr, serverless = need(on(demand, "emr")), need(on(demand, "serverless"))
    return {
        "emr": advised_emr(emr.cores, region, rows),
        "serverless": advised_serverless(serverless.cores, serverless.state_gb, region, rows),
    }


def advice_text(demand: Demand, region: str, *, own_cluster: bool) -> str:
    """The advised shape on the instance's own target: compute, shards, the
    failure cluster's brokers (``own_cluster``), the trigger."""
    found = need(demand)
    chosen = advised(demand, region)[demand.compute]
    fixed = FIXED_SEC[demand.compute]
    trigger = (
        f"its {demand.trigger_sec:g} s trigger held"
        if found.holds_trigger
        else f"its {demand.trigger_sec:g} s trigger is within the {fixed:g} s fixed cost of a "
        "batch (batches run back to back)"
    )
    brokers = f", failure cluster of {found.broker} brokers" if own_cluster else ""
    return f"{chosen.text}, {found.shards} provisioned shard(s){brokers}; {trigger}"


# --------------------------------------------------------------------------- an instance


def demand_of(config: InstanceConfig) -> Demand | None:
    """None when the instance declares no load."""
    load = config.expected_load
    if not load.records_per_sec:
        return None
    return Demand(
        config.compute,
        load.records_per_sec,
        load.record_bytes,
        load.headroom,
        config.job.trigger_interval_sec,
        config.job.dedup_horizon_hours,
    )


def shape_of(config: InstanceConfig) -> Shape:
    shards = config.stream.shard_count
    broker = config.kafka.broker_instance_type if config.creates_cluster else None
    if config.compute == "serverless":
        serverless = config.serverless
        return Shape(
            "serverless",
            serverless.executor_count * serverless.executor.cpu,
            shards,
            executor_disk_gb=serverless.executor.disk_gb,
            executors=serverless.executor_count,
            broker=broker,
        )
    emr = config.emr
    sizing = size_executors(emr.core_instance_type, emr.core_instance_count, emr.executor_cores)
    return Shape(
        "emr",
        sizing.instances * sizing.cores,
        shards,
        broker=broker,
        core_type=emr.core_instance_type,
    )


def advice_line(config: InstanceConfig) -> str | None:
    """The one line synth prints for an instance whose shape is more than
    :data:`OVERSIZED` times its need, or below it with the undersize accepted
    (below it otherwise, the configuration is refused: infra/config.py)."""
    demand = demand_of(config)
    if demand is None:
        return None
    found = verdict(demand, shape_of(config), config.region)
    if found is None:
        return None
    load = config.expected_load
    head = (
        f"advice: {config.stack_name} {found.kind}sized for {load.records_per_sec:g} records/s "
        f"of {load.record_bytes} B x{demand.headroom:g} headroom ({found.what})"
    )
    if found.kind == "under":
        head += f", accepted: {load.reason}"
    return f"{head}; advised: {found.advice}"
