"""Compare the runs the recipes appended to their --results files: one row per run, with the
scaling efficiency against the 1-device run of the same recipe (chapters 7 and 12), and for
the PyTorch recipes tokens per second (the transformer), model FLOPs utilisation (MFU: the
share of the device's peak the training's operations reach) and peak memory (chapter 18).

    python results_table.py results.jsonl [more.jsonl ...] [--plot scaling.png]
        [--model transformer] [--wide | --columns recipe,devices,per_device,efficiency]

By default it prints the columns that compare runs: the recipe, the model's size (weights),
devices, precision, global batch, examples/s per device, efficiency and MFU, at most 100
characters a line for the recipes' rows (PyTorch's or Keras's, models under a billion
weights). --wide prints every column (the model's name, the device type, whether it was
compiled, step time, test accuracy, tokens/s per device and peak memory too); --columns the
ones named.

It also reads what `python -m tools.gpu_evidence` wrote (recipes/measured/*_evidence.jsonl):
the recipes' rows in it, one per step that trained.

Efficiency is examples/s per device with N devices over examples/s per device with 1, for
runs of the same recipe, model, device type, precision, compiling (--compile) and per-device
batch: 100% is perfect scaling; the rest went to communication and waiting.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

#: What a row needs, and the other names a recipe may give it (Keras says "replicas").
FIELDS = {
    "recipe": ("recipe",),
    "devices": ("world_size", "replicas"),
    "device_type": ("device_type",),
    "precision": ("precision",),
    "global_batch": ("global_batch",),
    "per_device": ("examples_per_s_per_device", "examples_per_s_per_replica"),
    "step_time_s": ("mean_step_time_s",),
    "accuracy": ("test_accuracy",),
}
#: What a row shows when the run reports it (older results and the Keras recipes do not).
OPTIONAL = {
    "model": "model",
    "weights": "parameters",
    "tokens": "tokens_per_s_per_device",
    "mfu": "mfu",
    "memory": "peak_memory_bytes",
    "compiled": "compiled",
}
COLUMNS = [
    ("recipe", "recipe", "{}"),
    ("model", "model", "{}"),
    ("weights", "weights", "{:,}"),
    ("devices", "devices", "{}"),
    ("device", "device_type", "{}"),
    ("precision", "precision", "{}"),
    ("compiled", "compiled", "{}"),
    ("global batch", "global_batch", "{}"),
    ("examples/s per device", "per_device", "{:.1f}"),
    ("efficiency", "efficiency", "{:.0%}"),
    ("step time (ms)", "step_ms", "{:.1f}"),
    ("test accuracy", "accuracy", "{:.4f}"),
    ("tokens/s per device", "tokens", "{:,.0f}"),
    ("MFU", "mfu", "{:.1%}"),
    ("peak memory (GiB)", "memory_gib", "{:.2f}"),
]
#: What the table shows without --wide or --columns: at most 100 characters a line for the
#: recipes' rows (the module's docstring says which).
DEFAULT = ["recipe", "weights", "devices", "precision", "global_batch", "per_device"]
DEFAULT += ["efficiency", "mfu"]


def read_runs(paths: list[str]) -> list[dict]:
    """The runs in the JSON-lines files, each with the names of `FIELDS`."""
    runs = []
    for path in paths:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as error:
            raise SystemExit(f"{path}: cannot read it ({error.strerror}).") from None
        found = 0
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("not a JSON object")
            except ValueError as error:
                raise SystemExit(
                    f"{path}, line {number}: not one run's results ({error}); each line must "
                    "be a JSON object, as the recipes write them with --results."
                ) from None
            if "step" in record:  # a step of tools/gpu_evidence: its recipe's row, if any
                if "recipe" not in (record.get("result") or {}):
                    continue
                record = record["result"]
            run, missing = {}, []
            for field, names in FIELDS.items():
                name = next((n for n in names if n in record), None)
                if name is None:
                    missing.append(" or ".join(names))
                else:
                    run[field] = record[name]
            run.update({field: record.get(name) for field, name in OPTIONAL.items()})
            run["model"] = run["model"] or "cnn"
            if missing:
                raise SystemExit(
                    f"{path}, line {number}: no {', '.join(missing)}; is it a recipe's "
                    "results file?"
                )
            runs.append(run)
            found += 1
        if not found:
            raise SystemExit(f"{path}: no results in it; run a recipe with --results {path} first.")
    return runs


def _group(run: dict) -> tuple:
    """Runs that scale against each other: same recipe, model and its size (weights),
    device type, precision, compiled or not, and per-device batch."""
    batch_per_device = run["global_batch"] // max(run["devices"], 1)
    model = run["model"], run["weights"]
    kind = run["device_type"], run["precision"], bool(run["compiled"])
    return run["recipe"], model, *kind, batch_per_device


def add_efficiency(runs: list[dict]) -> None:
    """Each run's examples/s per device over that of the last 1-device run of its group."""
    single = {_group(run): run["per_device"] for run in runs if run["devices"] == 1}
    for run in runs:
        reference = single.get(_group(run))
        throughput = run["per_device"]
        run["efficiency"] = throughput / reference if reference and throughput else None
        run["step_ms"] = run["step_time_s"] * 1000 if run["step_time_s"] else None
        run["memory_gib"] = run["memory"] / 2**30 if run["memory"] else None


def format_table(runs: list[dict], keys: list[str] | None = None) -> str:
    """The runs as an aligned text table, with the columns of `keys` in their order
    (None: all of them); '-' where a value is missing."""
    by_key = {column[1]: column for column in COLUMNS}
    columns = COLUMNS if keys is None else [by_key[key] for key in keys]
    rows = [[title for title, _, _ in columns]]
    for run in runs:
        rows.append(
            ["-" if run.get(key) is None else style.format(run[key]) for _, key, style in columns]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def plot_scaling(runs: list[dict], path: str) -> None:
    """Examples/s of all devices against the number of devices, one line per group of
    `_group`, with perfect scaling from its 1-device run dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    groups: dict[tuple, dict[int, float]] = {}
    for run in runs:
        if run["per_device"]:
            groups.setdefault(_group(run), {})[run["devices"]] = run["per_device"] * run["devices"]
    for (recipe, (model, weights), device, precision, compiled, batch), points in groups.items():
        devices = sorted(points)
        size = f", {weights:,} weights" if weights else ""
        how = f"{precision}, compiled" if compiled else precision
        (line,) = axes.plot(
            devices,
            [points[d] for d in devices],
            "o-",
            label=f"{recipe} ({model}{size}), {device}, {how}, {batch} per device",
        )
        if 1 in points:
            axes.plot(devices, [points[1] * d for d in devices], "--", color=line.get_color())
    axes.set_xticks(sorted({d for points in groups.values() for d in points}))
    axes.set_xlabel("devices")
    axes.set_ylabel("examples/s (all devices)")
    axes.set_title("Scaling (dashed: perfect)")
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="JSON-lines files the recipes wrote")
    parser.add_argument("--plot", metavar="PNG", help="also save examples/s against devices")
    parser.add_argument("--model", help="only the runs of this model (cnn or transformer)")
    keys, default = [key for _, key, _ in COLUMNS], ",".join(DEFAULT)
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--wide", action="store_true", help="every column")
    shown.add_argument(
        "--columns",
        type=lambda text: text.split(","),
        default=DEFAULT,
        help=f"these columns, comma-separated, of: {','.join(keys)} (default: {default})",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.columns) - set(keys))
    if unknown:
        parser.error(f"--columns: no column {', '.join(unknown)}; choose from {','.join(keys)}")
    runs = read_runs(args.results)
    add_efficiency(runs)
    if args.model:
        runs = [run for run in runs if run["model"] == args.model]
        if not runs:
            raise SystemExit(f"no run of --model {args.model} in {', '.join(args.results)}.")
    print(format_table(runs, None if args.wide else args.columns))
    if args.plot:
        plot_scaling(runs, args.plot)
        print(f"plot saved to {args.plot}")


if __name__ == "__main__":
    main()
