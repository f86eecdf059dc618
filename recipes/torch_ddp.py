"""Train a small CNN (or, with --model transformer, a small transformer on text) data
parallel with PyTorch DistributedDataParallel (DDP): a recipe to copy, with `data.py` and
`transformer.py` beside it, to a machine with GPUs. Start it with torchrun, which starts
one process per GPU (use the same commands with 0 GPUs to train on CPU cores):

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

Where the book explains each part:
- one process per GPU, DistributedSampler, gradients averaged by DDP: chapter 6; the
  DataLoader's worker processes, pinned memory and a random generator per rank: chapter 11;
  DDP's gradient buckets (--bucket-cap-mb): chapter 17
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
the end rank 0 appends one JSON line to --results; `python results_table.py results.jsonl`
compares runs (examples per second, efficiency, MFU; with --wide tokens per second and peak
memory too). torch_fsdp.py trains the same way with the model sharded (chapter 15).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from data import append_result, load, split_test, warmup_length  # recipes/data.py, beside it
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

#: Signals that ask a job to stop soon: Slurm and Kubernetes send SIGTERM some seconds
#: before they kill a job. Slurm can send SIGUSR1 earlier; under torchrun (which forwards
#: only SIGTERM, SIGINT, SIGHUP and SIGQUIT by default) send it to the batch script,
#: `sbatch --signal=B:USR1@120` as recipes/slurm/ does, or add SIGUSR1 to torchrun's
#: --signals-to-handle: `--signal=USR1@120` alone would kill torchrun outright.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


# ---- command line -----------------------------------------------------------------------


def _at_least(least: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number; got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}; got {value}")
        return value

    return parse


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number; got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive; got {value:g}")
    return value


def _fraction(text: str) -> float:
    value = _positive_float(text)
    if not value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1; got {value:g}")
    return value


def make_parser(recipe: str, description: str) -> argparse.ArgumentParser:
    """The flags both PyTorch recipes share."""
    parser = argparse.ArgumentParser(
        prog=f"torchrun --nproc_per_node=N {recipe}.py",
        description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add(
        "--model",
        choices=["cnn", "transformer"],
        default="cnn",
        help="cnn: the book's small CNN on images; transformer: a small decoder-only "
        "transformer predicting the next character of the Python standard library's sources",
    )
    add("--epochs", type=_at_least(1), default=5, help="passes over the training set")
    add(
        "--batch-per-device",
        type=_at_least(1),
        default=64,
        help="examples per process and step; global batch = this x number of processes",
    )
    add(
        "--lr",
        type=_positive_float,
        help="learning rate tuned for --base-batch (default: 0.05 for the CNN's SGD, 0.001 "
        "for the transformer's AdamW); scaled linearly to the global batch",
    )
    add("--base-batch", type=_at_least(1), default=64, help="the global batch --lr was tuned for")
    add(
        "--warmup-steps",
        type=_at_least(0),
        default=50,
        help="steps over which the learning rate rises linearly to its scaled value",
    )
    add(
        "--images",
        metavar="FOLDER",
        help="your own images, one subfolder per class (default: the bundled digits)",
    )
    add("--test-fraction", type=_fraction, default=0.1, help="held-out share of the examples")
    add("--context", type=_at_least(1), default=128, help="transformer: tokens per sequence")
    add("--width", type=_at_least(1), default=256, help="transformer: the model's width")
    add("--layers", type=_at_least(1), default=4, help="transformer: blocks")
    add("--heads", type=_at_least(1), default=4, help="transformer: attention heads")
    add(
        "--text-bytes",
        type=_at_least(2),
        default=4_000_000,
        help="transformer: bytes of the standard library's sources to train and test on",
    )
    add(
        "--peak-tflops",
        type=_positive_float,
        help="the device's peak, for MFU (default: the vendor's figure for known GPUs, a "
        "measured matrix product on CPUs)",
    )
    add("--out", default=f"runs/{recipe}", help="folder for checkpoints and final weights")
    add("--results", default="results.jsonl", help="JSON-lines file rank 0 appends to")
    add("--seed", type=int, default=0, help="initial weights and shuffling")
    add(
        "--num-workers",
        type=_at_least(0),
        default=2,
        help="DataLoader worker processes per training process",
    )
    add(
        "--precision",
        choices=["auto", "fp32", "bf16"],
        default="auto",
        help="auto: bfloat16 on GPUs that have it in hardware, else float32",
    )
    add(
        "--deterministic",
        action="store_true",
        help="only deterministic kernels: the same weights from the same run (slower on GPUs)",
    )
    add("--log-every", type=_at_least(1), default=20, help="print the loss every N steps")
    add("--max-steps", type=_at_least(1), help="stop after this many steps in all (tests)")
    add("--limit-examples", type=_at_least(2), help="use only the first N examples (tests)")
    return parser


def check_model_flags(args: argparse.Namespace) -> argparse.Namespace:
    """The learning rate's default for the model; --images only with the CNN; heads that
    split the transformer's width evenly."""
    if args.model == "transformer" and args.images:
        raise SystemExit("--images: the transformer trains on text; use --model cnn for images.")
    if args.model == "transformer" and args.width % args.heads:
        raise SystemExit(f"--width {args.width} must be a multiple of --heads {args.heads}.")
    if args.lr is None:
        args.lr = 0.05 if args.model == "cnn" else 0.001
    return args


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = make_parser("torch_ddp", "Data-parallel training with PyTorch DDP.")
    parser.add_argument(
        "--bucket-cap-mb",
        type=_positive_float,
        default=None,
        help="size of DDP's gradient buckets in MiB, each all-reduced as soon as it is "
        "full (default: DDP's own, 25 MiB after a first bucket of 1 MiB; any value "
        "given sizes the first bucket too)",
    )
    return parser.parse_args(argv)


# ---- processes, devices, precision --------------------------------------------------------


def launch_environment(script: str) -> tuple[int, int, int, int]:
    """RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, which torchrun sets."""
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    missing = [name for name in names if name not in os.environ]
    if missing:
        raise SystemExit(
            f"{script}: start it with torchrun --nproc_per_node=N {script} ... "
            f"(N: the GPUs of this machine); {', '.join(missing)} not set."
        )
    rank, world_size, local_rank, local_world_size = (int(os.environ[n]) for n in names)
    return rank, world_size, local_rank, local_world_size


def choose_device(local_rank: int, local_world_size: int) -> torch.device:
    """GPU LOCAL_RANK when the machine has a GPU for each of its processes, else the CPU."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    gpus = torch.cuda.device_count()
    if local_world_size > gpus:
        raise SystemExit(
            f"--nproc_per_node={local_world_size} but this machine has {gpus} GPU(s): start "
            f"at most {gpus} processes per machine (one per GPU), or hide the GPUs "
            "(CUDA_VISIBLE_DEVICES=) to train on the CPU."
        )
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    return device


def choose_precision(requested: str, device: torch.device) -> str:
    """bf16 (autocast) where the GPU computes in bfloat16 in hardware; fp32 elsewhere."""
    in_hardware = device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)
    if requested == "auto":
        return "bf16" if in_hardware else "fp32"
    if requested == "bf16" and device.type == "cuda" and not in_hardware:
        raise SystemExit(
            "--precision bf16: this GPU has no bfloat16 in hardware (NVIDIA Ampere or "
            "newer has); use --precision fp32 or auto."
        )
    return requested


def seed_everything(seed: int, deterministic: bool) -> None:
    """Same initial weights on every process, and reproducible runs; with `deterministic`,
    only deterministic kernels (cuDNN and cuBLAS have faster ones that are not)."""
    torch.manual_seed(seed)  # the CPU's and every GPU's generator
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False


# ---- data and model -----------------------------------------------------------------------


def datasets(args: argparse.Namespace, world_size: int) -> tuple[TensorDataset, TensorDataset]:
    """Training and held-out test sets: NCHW float32 images and int64 labels, or (the
    transformer) int64 token sequences and the same moved one token on."""
    if args.model == "transformer":
        from transformer import load_python_sources, sequences  # transformer.py, beside it

        inputs, targets = (
            t.numpy() for t in sequences(load_python_sources(args.text_bytes), args.context)
        )
    else:
        images, targets = load(args.images)
        inputs = np.ascontiguousarray(images.transpose(0, 3, 1, 2))
    if args.limit_examples:
        inputs, targets = inputs[: args.limit_examples], targets[: args.limit_examples]
    train, test = (
        TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
        for x, y in split_test(inputs, targets, args.test_fraction)
    )
    global_batch = args.batch_per_device * world_size
    if global_batch > len(train):
        raise SystemExit(
            f"the global batch, {global_batch} (--batch-per-device {args.batch_per_device} x "
            f"{world_size} processes), is larger than the {len(train)} training examples: "
            "lower --batch-per-device or use more data."
        )
    return train, test


class SmallCNN(nn.Module):
    """Two 3x3 convolutions with max pooling, then logits (the book's small CNN)."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 16, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 5 * 5, classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.layers(images)


def build_model(args: argparse.Namespace, classes: int) -> nn.Module:
    """The CNN, or the transformer of --context, --width, --layers and --heads."""
    if args.model == "transformer":
        from transformer import CharTransformer

        return CharTransformer(args.context, args.width, args.layers, args.heads)
    return SmallCNN(classes)


def build_optimizer(args: argparse.Namespace, model: nn.Module, lr: float):
    """SGD with momentum for the CNN; AdamW, transformers' usual choice, for the transformer."""
    if args.model == "transformer":
        return torch.optim.AdamW(model.parameters(), lr=lr)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def loss_of(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean"):
    """Cross-entropy, for one label per example or one per token."""
    return nn.functional.cross_entropy(
        logits.float().flatten(0, -2), targets.flatten(), reduction=reduction
    )


def training_flops(args, classes: int, inputs: torch.Tensor, targets: torch.Tensor) -> int:
    """The floating-point operations of one forward and backward pass on this batch, as
    PyTorch's FlopCounterMode counts them (matrix products and convolutions), on a model
    built on the meta device (shapes only: nothing is allocated or computed). Attention is
    counted as its plain matrix products, the masked half included, as PaLM's formula does
    (chapter 18); causal fused kernels skip most of that half."""
    with torch.device("meta"):
        shapes_only = build_model(args, classes)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        loss_of(shapes_only(inputs.to("meta")), targets.to("meta")).backward()
    return counter.get_total_flops()


#: Peak dense operations per second from NVIDIA's datasheets (as PyTorch's torchtitan and
#: MosaicML's Composer copy them; the datasheets print some only "with sparsity", twice
#: these), by torch.cuda.get_device_name(): (bfloat16 on tensor cores, float32 without
#: them; PyTorch multiplies float32 matrices in float32 unless allow_tf32 is set, but runs
#: cuDNN's convolutions in TF32 on GPUs that have it, so the CNN's float32 MFU reads high).
#: "NVIDIA H200" may also name the H200 NVL, whose peak is lower. A GPU not here (another
#: name, an older driver's) needs --peak-tflops.
GPU_PEAK_FLOPS: dict[str, tuple[float | None, float]] = {
    "Tesla T4": (None, 8.1e12),  # no bfloat16
    "Tesla V100-SXM2-16GB": (None, 15.7e12),
    "Tesla V100-SXM2-32GB": (None, 15.7e12),
    "NVIDIA A100-SXM4-40GB": (312e12, 19.5e12),
    "NVIDIA A100-SXM4-80GB": (312e12, 19.5e12),
    "NVIDIA A100-SXM-80GB": (312e12, 19.5e12),
    "NVIDIA A100-PCIE-40GB": (312e12, 19.5e12),
    "NVIDIA A100 80GB PCIe": (312e12, 19.5e12),
    "NVIDIA A10": (125e12, 31.2e12),
    "NVIDIA L4": (121e12, 30.3e12),
    "NVIDIA L40S": (362e12, 91.6e12),
    "NVIDIA H100 80GB HBM3": (989e12, 67e12),  # SXM
    "NVIDIA H100 PCIe": (756e12, 51e12),
    "NVIDIA H200": (989e12, 67e12),  # SXM
}


def peak_flops(args, device: torch.device, precision: str, log) -> float | None:
    """The device's peak operations per second for MFU: --peak-tflops; for a GPU the
    vendor's figure (None for a GPU not in GPU_PEAK_FLOPS); for the CPU a float32 matrix
    product measured now (each process at once: the share of the cores each one has)."""
    if args.peak_tflops:
        return args.peak_tflops * 1e12
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        if name in GPU_PEAK_FLOPS:
            bf16, fp32 = GPU_PEAK_FLOPS[name]
            return bf16 if precision == "bf16" else fp32
        log(f"no peak known for {name}: give --peak-tflops for the MFU", flush=True)
        return None
    a = torch.randn(1024, 1024)
    best = float("inf")
    for _ in range(5):
        tick = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - tick)
    return 2 * 1024**3 / best


class ResumableSampler(DistributedSampler):
    """A DistributedSampler that can start an epoch part-way (`skip` examples in), so a
    resumed run trains on exactly the batches the interrupted one had still to see."""

    skip = 0

    def __iter__(self):
        return iter(list(super().__iter__())[self.skip :])

    def __len__(self) -> int:
        return self.num_samples - self.skip


def _ignore_stop_signals(worker_id: int) -> None:
    """DataLoader workers ignore SIGTERM (Slurm signals every process of a job): the
    training process stops them when it is ready."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def warmup(optimizer: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate rises linearly over `steps` steps to the optimizer's, then stays."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / steps) if steps else 1.0
    )


class StopFlag:
    """Remembers a stop signal; training stops at the next step boundary, where the ranks
    agree (one of them may have been signalled earlier than the others)."""

    def __init__(self) -> None:
        self.received = False
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        self.received = True


# ---- what DDP and FSDP do differently ---------------------------------------------------


class DDPTraining:
    """Wrapping the model, mixed precision and checkpoints for DDP; torch_fsdp.py changes
    these and nothing else."""

    recipe = "torch_ddp"

    def __init__(self, args, device: torch.device, precision: str, rank: int) -> None:
        self.args, self.device, self.precision, self.rank = args, device, precision, rank
        self.out = Path(args.out)
        self.checkpoint = self.out / "checkpoint.pt"

    def wrap(self, model: nn.Module) -> nn.Module:
        """Every process holds the whole model; DDP broadcasts rank 0's weights and
        all-reduces the gradients in buckets while the backward pass runs."""
        return nn.parallel.DistributedDataParallel(
            model,
            device_ids=[self.device.index] if self.device.type == "cuda" else None,
            bucket_cap_mb=self.args.bucket_cap_mb,
        )

    def autocast(self):
        """Where the forward pass computes in bfloat16 (the weights stay float32)."""
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def save(self, model, optimizer, scheduler, progress: dict) -> None:
        """Rank 0 writes a temporary file and renames it over the checkpoint: a crash while
        writing leaves the previous checkpoint whole."""
        if self.rank == 0:
            state = {
                "model": model.module.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "progress": progress,
            }
            _atomic_write(self.checkpoint, lambda file: torch.save(state, file))
        dist.barrier()  # every rank knows the checkpoint is complete

    def latest(self) -> str | None:
        """What this rank sees to resume from: the checkpoint's modification time, or None."""
        if not self.checkpoint.exists():
            return None
        return f"{self.checkpoint.name} of {self.checkpoint.stat().st_mtime_ns}"

    def restore(self, model, optimizer, scheduler) -> dict:
        """Load the checkpoint on every rank; return its progress."""
        state = torch.load(self.checkpoint, map_location=self.device, weights_only=True)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        return state["progress"]

    def whole_weights(self, model) -> dict[str, torch.Tensor]:
        """The trained weights (all ranks call this; rank 0 writes them)."""
        return {name: w.cpu() for name, w in model.module.state_dict().items()}


def _atomic_write(path: Path, write) -> None:
    """`write(file)` into a temporary file, flushed to disk, then renamed to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        write(file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


# ---- training -------------------------------------------------------------------------------


def agreed_checkpoint(training) -> bool:
    """Whether there is a checkpoint to resume from, once every rank has said which one it
    sees: ranks that see different ones (an --out that is not shared, a stale network
    file system) would load different states, or wait for each other forever."""
    seen = [None] * dist.get_world_size()
    dist.all_gather_object(seen, training.latest())
    if len(set(seen)) > 1:
        raise SystemExit(
            f"the processes see different checkpoints in {training.out} (rank by rank: "
            f"{seen}): --out must be one folder that every machine shares."
        )
    return seen[0] is not None


@torch.no_grad()
def evaluate(model, test: TensorDataset, batch: int, training, rank: int, world_size: int):
    """Loss and accuracy (of each label, or each token) on the test set: each rank takes
    every world_size-th example, and the sums are all-reduced. Every rank runs the same
    number of batches (FSDP needs it)."""
    images, labels = test.tensors
    n = len(labels)
    indices = torch.arange(rank, -(-n // world_size) * world_size, world_size)
    counted = indices < n  # the padding that evens out the shares is not counted
    indices = indices.clamp(max=n - 1)
    totals = torch.zeros(3, dtype=torch.float64, device=training.device)
    model.eval()
    for part, keep in zip(indices.split(batch), counted.split(batch)):
        x, y = images[part].to(training.device), labels[part].to(training.device)
        keep = keep.to(training.device)
        with training.autocast():
            logits = model(x).float()
        losses = loss_of(logits, y, reduction="none").view(y.shape)
        keep = keep.view(-1, *[1] * (y.dim() - 1)).expand(y.shape)  # each token of an example
        right = (logits.argmax(-1) == y) & keep
        totals += torch.stack([(losses * keep).sum(), right.sum(), keep.sum()]).double()
    model.train()
    dist.all_reduce(totals)  # sums over the ranks
    return (totals[0] / totals[2]).item(), (totals[1] / totals[2]).item()


def fit(args, training, train: TensorDataset, test: TensorDataset, stop: StopFlag) -> None:
    """Train, checkpoint, resume, stop cleanly on a signal, and report (rank 0)."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    device, log = training.device, (print if rank == 0 else lambda *a, **k: None)
    global_batch = args.batch_per_device * world_size
    lr = args.lr * global_batch / args.base_batch  # the linear rule
    classes = int(torch.cat([train.tensors[1], test.tensors[1]]).max()) + 1
    tokens_per_example = train.tensors[1][0].numel()  # 1 for an image's label

    steps_per_epoch = len(train) // world_size // args.batch_per_device
    max_steps = args.max_steps or args.epochs * steps_per_epoch
    warmup_steps = warmup_length(args.warmup_steps, max_steps, log)

    seed_everything(args.seed, args.deterministic)
    bare = build_model(args, classes).to(device)
    parameters = sum(w.numel() for w in bare.parameters())
    batch = train[: args.batch_per_device]
    flops_per_step = training_flops(args, classes, *batch)
    peak = peak_flops(args, device, training.precision, log)
    model = training.wrap(bare)
    optimizer = build_optimizer(args, model, lr)
    scheduler = warmup(optimizer, warmup_steps)
    sampler = ResumableSampler(
        train, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed, drop_last=True
    )
    loader = DataLoader(
        train,
        batch_size=args.batch_per_device,
        sampler=sampler,
        drop_last=True,  # equal batches on every rank
        num_workers=args.num_workers,
        pin_memory=device.type == "cuda",
        persistent_workers=args.num_workers > 0,
        worker_init_fn=_ignore_stop_signals,
        # each rank's workers their own random numbers (chapter 11): with the same seed
        # everywhere, every rank would draw the same random augmentation
        generator=torch.Generator().manual_seed(args.seed + rank),
    )

    try:
        progress = (
            training.restore(model, optimizer, scheduler) if agreed_checkpoint(training) else None
        )
    except (RuntimeError, ValueError, KeyError) as error:  # another model's or size's
        first = str(error).strip().splitlines()[0]
        raise SystemExit(
            f"the checkpoint in {args.out} does not fit this model ({first}): give this run "
            "another --out, or delete that folder to start over"
        ) from None
    epoch, step, done = 0, 0, 0  # epoch, step within it, steps in all
    if progress:
        epoch, step, done = progress["epoch"], progress["step"], progress["global_step"]
        log(f"resumed from {args.out}: epoch {epoch + 1}, step {step}", flush=True)
        if progress["world_size"] != world_size:  # restarted with more or fewer processes
            step = 0  # the data split differently: the epoch starts again
            scheduler.base_lrs = [lr] * len(scheduler.base_lrs)  # the rule, for this batch
            for group in optimizer.param_groups:
                group["initial_lr"], group["lr"] = lr, lr * scheduler.lr_lambdas[0](done)
            log(
                f"saved by {progress['world_size']} processes, resumed by {world_size}: "
                f"epoch {epoch + 1} runs from its first step, learning rate {lr:g}",
                flush=True,
            )
    log(
        f"{training.recipe}: {world_size} process(es) on {device.type}, {training.precision}; "
        f"global batch {global_batch} = {args.batch_per_device} x {world_size}; learning "
        f"rate {lr:g} = {args.lr:g} x {global_batch}/{args.base_batch}, warm-up "
        f"{warmup_steps} steps; {len(train)} training, {len(test)} test examples",
        flush=True,
    )
    log(
        f"{args.model}: {parameters:,} parameters, {flops_per_step / 1e9:.3g} GFLOP per step "
        "and process (forward and backward)",
        flush=True,
    )
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    step_times, epoch_losses, steps_this_run, stopped = [], [], 0, False
    test_loss = test_accuracy = float("nan")
    while epoch < args.epochs and done < max_steps and not stopped:
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        sampler.skip = step * args.batch_per_device
        losses, tick = [], time.perf_counter()
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            with training.autocast():
                loss = loss_of(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            step, done, steps_this_run = step + 1, done + 1, steps_this_run + 1
            # One small all-reduce per step: the summed loss, and whether any rank was
            # signalled to stop (so that they all stop after the same step).
            shared = torch.stack([loss.detach(), torch.tensor(float(stop.received), device=device)])
            dist.all_reduce(shared)
            mean_loss, stopping = shared[0].item() / world_size, shared[1].item() > 0
            losses.append(mean_loss)
            now = time.perf_counter()
            if len(losses) > 1:  # not the first step of an epoch: it waits for the loader
                step_times.append(now - tick)
            tick = now
            if step % args.log_every == 0 or step == 1:
                log(
                    f"epoch {epoch + 1} step {step}/{steps_per_epoch} loss {mean_loss:.4f}",
                    flush=True,
                )
            if stopping or done >= max_steps:
                stopped = stopping
                break
        if losses:
            epoch_losses.append(sum(losses) / len(losses))
        if stopped:
            position = {"epoch": epoch, "step": step, "global_step": done}
            training.save(model, optimizer, scheduler, {**position, "world_size": world_size})
            log(
                f"stop signal: checkpoint saved after epoch {epoch + 1} step {step}; start "
                "the same command again to resume.",
                flush=True,
            )
            return
        test_loss, test_accuracy = evaluate(
            model, test, args.batch_per_device, training, rank, world_size
        )
        log(
            f"epoch {epoch + 1} step {step}: train loss "
            f"{epoch_losses[-1] if losses else float('nan'):.4f}, test loss {test_loss:.4f}, "
            f"test accuracy {test_accuracy:.4f}",
            flush=True,
        )
        if step >= steps_per_epoch:
            epoch, step = epoch + 1, 0  # the checkpoint says: start the next epoch
        position = {"epoch": epoch, "step": step, "global_step": done}
        training.save(model, optimizer, scheduler, {**position, "world_size": world_size})

    weights = training.whole_weights(model)  # a collective for FSDP: every rank calls it
    if rank == 0:
        _atomic_write(training.out / "model.pt", lambda file: torch.save(weights, file))
    if not steps_this_run:
        log(
            f"nothing to train: the checkpoint in {args.out} has {done} steps already; "
            "raise --epochs or use another --out."
        )
        return
    mean_step = sum(step_times) / len(step_times) if step_times else None
    achieved = mean_step and flops_per_step / mean_step  # operations per second and device
    results = {
        "recipe": training.recipe,
        "world_size": world_size,
        "nodes": world_size // int(os.environ["LOCAL_WORLD_SIZE"]),
        "device_type": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "precision": training.precision,
        "batch_per_device": args.batch_per_device,
        "global_batch": global_batch,
        "learning_rate": lr,
        "model": args.model,
        "parameters": parameters,
        "examples_per_s_per_device": mean_step and args.batch_per_device / mean_step,
        "tokens_per_s_per_device": (
            mean_step and args.batch_per_device * tokens_per_example / mean_step
            if args.model == "transformer"
            else None
        ),
        "flops_per_step_per_device": flops_per_step,
        "peak_flops_per_device": peak,
        "mfu": achieved / peak if achieved and peak else None,
        "peak_memory_bytes": (
            torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        ),
        "mean_step_time_s": mean_step,
        "final_train_loss": epoch_losses[-1] if epoch_losses else None,
        "loss_per_epoch": epoch_losses,
        "test_loss": test_loss,
        "test_accuracy": test_accuracy,
        "epochs": round(done / steps_per_epoch, 3),
        "steps": done,
        "steps_this_run": steps_this_run,
        "steps_per_epoch": steps_per_epoch,
    }
    if rank == 0:
        append_result(args.results, results)
        print(f"results appended to {args.results}; weights in {training.out / 'model.pt'}")


def run(args: argparse.Namespace, training_class: type[DDPTraining], script: str) -> None:
    """Check the launch, join the process group, train, and always leave the group."""
    stop = StopFlag()  # first: a signal during start-up is remembered too
    args = check_model_flags(args)
    rank, world_size, local_rank, local_world_size = launch_environment(script)
    device = choose_device(local_rank, local_world_size)
    precision = choose_precision(args.precision, device)
    train, test = datasets(args, world_size)
    cuda = device.type == "cuda"
    # NCCL between GPUs, gloo between CPU processes
    dist.init_process_group("nccl" if cuda else "gloo", device_id=device if cuda else None)
    try:
        fit(args, training_class(args, device, precision, rank), train, test, stop)
    finally:
        dist.destroy_process_group()


@record  # torchrun's failure summary then shows the failing rank's traceback
def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv), DDPTraining, "torch_ddp.py")


if __name__ == "__main__":
    main()
    # Leave now: in Python's teardown, a gloo thread freeing a finished
    # collective can abort the process (pytorch/pytorch#117762).
    sys.stdout.flush()
    os._exit(0)
