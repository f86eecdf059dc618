"""Train a small CNN (or, with --model transformer, the small transformer) with its weights,
gradients and optimizer state sharded over the processes by PyTorch FSDP2 (`fully_shard`),
with sharded checkpoints written by Distributed Checkpoint. It trains as
torch_ddp.py does, with the flags torch_ddp.py has but --bucket-cap-mb; what FSDP2 does
differently is strategies.py's FSDPStrategy. Copy this folder, recipes/pytorch/, to a
machine with GPUs:

    # 1 GPU
    torchrun --standalone --nproc_per_node=1 torch_fsdp.py --epochs 5
    # 8 GPUs on one machine
    torchrun --standalone --nproc_per_node=8 torch_fsdp.py --epochs 5
    # 2 machines with 8 GPUs each: this command on both, HOST being the first machine's
    # address; --out on a filesystem both machines see (each rank writes its own shards)
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \
        --rdzv-id=digits-run-1 --max-restarts=3 torch_fsdp.py --epochs 5 --out /shared/run1

Where the book explains each part:
- fully_shard on each layer and on the whole model, bfloat16 weights in the forward and
  backward passes (MixedPrecisionPolicy), Distributed Checkpoint: chapter 15
- everything else (torchrun and machines, checkpoints and SIGTERM, the learning-rate rule
  and warm-up): as in torch_ddp.py, chapters 6, 8, 9 and 12

Checkpoints are folders `OUT/checkpoint-STEPS-epochE-S` (steps in all, then the epoch
and the step in it); `OUT/latest` names the newest complete one. A run started again with
the same --out resumes from it: exactly where it stopped with the same number of processes;
with another, Distributed Checkpoint splits the state anew and the epoch runs from its first
step. Rank 0 also writes the whole trained weights to `OUT/model.pt`.
"""

from __future__ import annotations

import os
import sys

from flags import make_parser
from launch import run
from strategies import FSDPStrategy
from torch.distributed.elastic.multiprocessing.errors import record


@record  # torchrun's failure summary then shows the failing rank's traceback
def main(argv: list[str] | None = None) -> None:
    parser = make_parser("torch_fsdp", "Sharded data-parallel training with PyTorch FSDP2.")
    run(parser.parse_args(argv), FSDPStrategy, "torch_fsdp.py")


if __name__ == "__main__":
    main()
    # Leave now: in Python's teardown, a gloo thread freeing a finished
    # collective can abort the process (pytorch/pytorch#117762).
    sys.stdout.flush()
    os._exit(0)
