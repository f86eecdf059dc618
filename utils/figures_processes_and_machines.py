"""Figures of the part "Several processes and machines" (chapters 9 to 11): torchrun's
processes, a TF_CONFIG cluster, the files each worker reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_rgb

from utils.figures_common import (
    ARROW,
    BLUE,
    DEVICE_HUES,
    GREEN,
    ORANGE,
    box,
)


def draw_torchrun_launch(agents: Sequence[Mapping[str, object]], endpoint: str):
    """torchrun's processes: one agent per machine, each starting its worker processes,
    and the rendezvous store the agents meet at; returns the figure.

    Introduced in chapter 9. `agents` holds one mapping per torchrun agent: its `name`
    ("node 0"), whether it `hosts_store` (exactly one does), and its `workers` as
    `(rank, local_rank)` pairs; the ranks of all workers together are 0..N-1, each once.
    `endpoint` is the store's address, as given to `--rdzv-endpoint` ("127.0.0.1:29400").
    """
    if not agents:
        raise ValueError("draw_torchrun_launch: give at least one agent.")
    hosts = [i for i, agent in enumerate(agents) if agent.get("hosts_store")]
    if len(hosts) != 1:
        raise ValueError(
            "draw_torchrun_launch: exactly one agent must host the rendezvous store "
            f"(hosts_store=True); {len(hosts)} do."
        )
    ranks = sorted(rank for agent in agents for rank, _ in agent["workers"])
    if ranks != list(range(len(ranks))):
        raise ValueError(
            f"draw_torchrun_launch: the workers' ranks must be 0..N-1, each once; got {ranks}."
        )
    host = hosts[0]
    most = max(len(agent["workers"]) for agent in agents)
    height = 0.75 * most + 2.2
    figure, axis = plt.subplots(figsize=(2.8 * len(agents) + 0.6, height * 0.9 + 0.4))
    axis.set(xlim=(-0.1, len(agents) + 0.1), ylim=(0, height))
    axis.axis("off")
    store_y = height - 0.45
    box(axis, host + 0.5, store_y, f"rendezvous store (c10d)\n{endpoint}", ORANGE)
    for column, agent in enumerate(agents):
        top = height - 1.1
        axis.add_patch(
            plt.Rectangle(
                (column + 0.06, 0.1), 0.88, top - 0.1, fill=False, ec="#3c8c50", lw=1.2
            )
        )
        role = "torchrun agent, hosts the store" if column == host else "torchrun agent"
        axis.text(
            column + 0.5,
            top - 0.35,
            f"{agent['name']}\n{role}",
            ha="center",
            va="center",
            fontsize=9,
            weight="bold",
            color="#2d6b3d",
        )
        for row, (rank, local_rank) in enumerate(sorted(agent["workers"])):
            box(
                axis,
                column + 0.5,
                top - 1.1 - 0.75 * row,
                f"worker process\nrank {rank} / local rank {local_rank}",
                BLUE,
            )
        if column == host:
            axis.annotate(
                "",
                xy=(column + 0.5, store_y - 0.3),
                xytext=(column + 0.5, top),
                arrowprops={**ARROW, "arrowstyle": "-"},
            )
        else:
            axis.annotate(
                "",
                xy=(host + 0.5 + (0.25 if column > host else -0.25), store_y - 0.2),
                xytext=(column + 0.5, top),
                arrowprops={
                    **ARROW,
                    "connectionstyle": f"arc3,rad={0.15 if column > host else -0.15}",
                },
            )
    figure.tight_layout()
    return figure


def draw_tf_config(configs: Sequence[Mapping]):
    """A `MultiWorkerMirroredStrategy` cluster from each worker's `TF_CONFIG`: one box per
    task with its address and role, and the all-reduce that joins them; returns the
    figure.

    Introduced in chapter 10. `configs[i]` is worker i's parsed `TF_CONFIG`; all must
    describe the same cluster. With no `chief` task, worker 0 is the chief."""
    if not configs or any(c["cluster"] != configs[0]["cluster"] for c in configs):
        raise ValueError(
            "draw_tf_config: give each worker's TF_CONFIG, one cluster for all."
        )
    cluster = configs[0]["cluster"]
    tasks = [
        (kind, index, address)
        for kind in cluster
        for index, address in enumerate(cluster[kind])
    ]
    has_chief = "chief" in cluster
    figure, axis = plt.subplots(figsize=(3.0 * len(tasks) + 0.4, 2.8))
    axis.set(xlim=(-0.6, len(tasks) - 0.4), ylim=(-1.2, 1.1))
    axis.axis("off")
    for position, (kind, index, address) in enumerate(tasks):
        chief = kind == "chief" or (not has_chief and kind == "worker" and index == 0)
        role = "\nthe chief: writes checkpoints" if chief else ""
        task = f'"task": {{"type": "{kind}", "index": {index}}}'
        box(
            axis,
            position,
            0.35,
            f"{kind} {index}, {address}\n{task}{role}",
            GREEN if chief else BLUE,
            fontsize=9,
        )
    if len(tasks) > 1:
        axis.annotate(
            "",
            xy=(len(tasks) - 1, -0.45),
            xytext=(0, -0.45),
            arrowprops={**ARROW, "arrowstyle": "<->", "color": "#c07a2c"},
        )
        axis.text(
            (len(tasks) - 1) / 2,
            -0.75,
            "all-reduce of the gradients, every step",
            ha="center",
            fontsize=9,
            color="#8a5218",
        )
    axis.set_title(
        'Every worker gets the same "cluster" and its own "task"', fontsize=11
    )
    figure.tight_layout()
    return figure


def draw_files_read(shares: Mapping[str, Sequence[Sequence[float]]]):
    """What each worker trains on under each auto-shard policy: a panel per policy, a row
    per worker, a square per file, filled by the share of that file's examples the worker
    got; returns the figure.

    Introduced in chapter 11. `shares[policy][w][f]` is that share, from 0 to 1; every
    policy has the same workers and files."""
    shapes = {np.shape(share) for share in shares.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(
            "draw_files_read: give every policy a share per worker and file, the same "
            "workers and files for all."
        )
    workers, files = next(iter(shapes))
    figure, axes = plt.subplots(  # one policy above another: narrow enough for a phone
        len(shares),
        1,
        figsize=(0.5 * files + 1.4, (0.5 * workers + 0.8) * len(shares) + 0.5),
    )
    for axis, (policy, share) in zip(np.atleast_1d(axes), shares.items()):
        for worker in range(workers):
            hue = np.array(to_rgb(DEVICE_HUES[worker % len(DEVICE_HUES)]))
            row = workers - 1 - worker
            for file in range(files):
                part = float(share[worker][file])
                axis.add_patch(
                    plt.Rectangle(
                        (file, row),
                        0.9,
                        0.9,
                        facecolor=(1 - 0.6 * part) + 0.6 * part * hue,
                        edgecolor=hue if part else "#bbbbbb",
                    )
                )
                label = "all" if part == 1 else f"{part:.0%}" if part else ""
                axis.text(
                    file + 0.45, row + 0.45, label, ha="center", va="center", fontsize=9
                )
        axis.set(xlim=(-0.1, files), ylim=(-0.1, workers), xlabel="file")
        axis.set_title(policy, fontsize=10)
        axis.set_xticks(
            [f + 0.45 for f in range(files)], [str(f) for f in range(files)]
        )
        axis.set_yticks(
            [workers - 1 - w + 0.45 for w in range(workers)],
            [f"worker {w}" for w in range(workers)],
        )
        axis.tick_params(length=0)
        for spine in axis.spines.values():
            spine.set_visible(False)
    figure.suptitle(
        "The share of each file's examples each worker trains on", fontsize=10
    )
    figure.tight_layout()
    return figure
