"""Train a small CNN (or, with --model transformer, a small transformer on text) data
parallel with PyTorch DistributedDataParallel (DDP). Copy this folder, recipes/pytorch/, to
a machine with GPUs and start it with torchrun, which starts one process per GPU (the same
commands with 0 GPUs train on CPU cores):

    # 1 GPU
    torchrun --standalone --nproc_per_node=1 torch_ddp.py --epochs 5
    # 8 GPUs on one machine
    torchrun --standalone --nproc_per_node=8 torch_ddp.py --epochs 5
    # the transformer, on 8 GPUs
    torchrun --standalone --nproc_per_node=8 torch_ddp.py --model transformer --epochs 1
    # 2 machines with 8 GPUs each: this command on both, HOST being the first machine's
    # address; --out on a filesystem both machines see (checkpoints are read back by all)
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \
        --rdzv-id=digits-run-1 --max-restarts=3 torch_ddp.py --epochs 5 --out /shared/run1

The folder, one concern a file: torch_ddp.py and torch_fsdp.py (the two commands),
flags.py (the command line), launch.py (processes, devices, precision, the process group),
training.py (the loop, checkpoints, resuming, stopping), strategies.py (what DDP and FSDP2
do differently, side by side), models.py, data.py, measure.py (operations, MFU, the
results row). Where the book explains each part:
- one process per GPU, DistributedSampler, gradients averaged by DDP: chapter 6; the
  DataLoader's worker processes, pinned memory and a random generator per rank: chapter 11;
  DDP's gradient buckets (--bucket-cap-mb) and torch.compile with DDP (--compile): chapter 17
- checkpoints each epoch written atomically, automatic resume, a clean stop on SIGTERM
  (what Slurm and Kubernetes send before they stop a job): chapter 8
- torchrun, several machines, restarts (--max-restarts): chapter 9
- global batch = per-device batch x processes, the linear learning-rate rule with a
  warm-up: chapter 12; bfloat16 mixed precision: chapter 13
- the transformer, its operations per step, the share of the device's peak they reach
  (model FLOPs utilisation, MFU) and its peak memory: chapter 18

Start the same command again (same --out) to resume from the last checkpoint. On SIGTERM (or
SIGUSR1 sent to the processes themselves: torchrun forwards only SIGTERM, SIGINT, SIGHUP and
SIGQUIT unless --signals-to-handle adds it) every process stops after the current step, the
checkpoint is saved and the processes exit with code 0; torchrun, when it is signalled too,
then exits with code 1 and a SignalException (the job was stopped, not finished). Give the
job at least 30 s to stop (Kubernetes' terminationGracePeriodSeconds, Slurm's KillWait). At
the end rank 0 appends one JSON line to --results; recipes/results_table.py compares runs
(`python ../results_table.py results.jsonl`: examples per second, efficiency, MFU; with
--wide tokens per second and peak memory too). torch_fsdp.py trains the same way with the
model sharded (chapter 15).
"""

from __future__ import annotations

import os
import sys

from flags import make_parser, positive_float
from launch import run
from strategies import DDPStrategy
from torch.distributed.elastic.multiprocessing.errors import record


def parse_args(argv: list[str] | None = None):
    parser = make_parser("torch_ddp", "Data-parallel training with PyTorch DDP.")
    parser.add_argument(
        "--bucket-cap-mb",
        type=positive_float,
        default=None,
        help="size of DDP's gradient buckets in MiB, each all-reduced as soon as it is "
        "full (default: DDP's own, 25 MiB after a first bucket of 1 MiB; any value "
        "given sizes the first bucket too)",
    )
    args = parser.parse_args(argv)
    if args.compile and args.bucket_cap_mb is not None and args.bucket_cap_mb < 1:
        raise SystemExit(  # chapter 17, section 6: DDPOptimizer's first bucket is 1 MiB
            f"--compile with --bucket-cap-mb {args.bucket_cap_mb}: torch.compile splits "
            "the model at buckets whose first is 1 MiB, and fails on smaller ones; give 1 "
            "or more."
        )
    return args


@record  # torchrun's failure summary then shows the failing rank's traceback
def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv), DDPStrategy, "torch_ddp.py")


if __name__ == "__main__":
    main()
    # Leave now: in Python's teardown, a gloo thread freeing a finished
    # collective can abort the process (pytorch/pytorch#117762).
    sys.stdout.flush()
    os._exit(0)
