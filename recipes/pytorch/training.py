"""The training loop both recipes share: the data split over the processes, the learning
rate's rule and warm-up, checkpoints each epoch, resuming, a clean stop on a signal, the
held-out test, and the results row. `strategies.py` holds what DDP and FSDP2 do
differently (wrapping the model, mixed precision, checkpoint files)."""

from __future__ import annotations

import argparse
import os
import signal
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from measure import append_result, peak_flops, results_row, training_flops
from models import build_model, build_optimizer, loss_of
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

#: Signals that ask a job to stop soon: Slurm and Kubernetes send SIGTERM some seconds
#: before they kill a job. Slurm can send SIGUSR1 earlier; under torchrun (which forwards
#: only SIGTERM, SIGINT, SIGHUP and SIGQUIT by default) send it to the batch script,
#: `sbatch --signal=B:USR1@120` as recipes/slurm/ does, or add SIGUSR1 to torchrun's
#: --signals-to-handle: `--signal=USR1@120` alone would kill torchrun outright.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class StopFlag:
    """Remembers a stop signal; training stops at the next step boundary, where the ranks
    agree (one of them may have been signalled earlier than the others)."""

    def __init__(self) -> None:
        self.received = False
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        self.received = True


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


def seed_everything(seed: int, deterministic: bool) -> None:
    """Same initial weights on every process, and reproducible runs; with `deterministic`,
    only deterministic kernels (cuDNN and cuBLAS have faster ones that are not)."""
    torch.manual_seed(seed)  # the CPU's and every GPU's generator
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False


def warmup_length(requested: int, total_steps: int, log=print) -> int:
    """The warm-up, at most a quarter of the run's steps: with many devices a small dataset
    has few steps per epoch, and a warm-up longer than the run would never reach the
    learning rate the linear rule asks for. `log`s it when it shortens it."""
    steps = min(requested, total_steps // 4)
    if steps < requested:
        log(
            f"warm-up shortened from {requested} to {steps} steps, a quarter of the "
            f"{total_steps} steps of this run (more --epochs or a smaller batch give more)",
            flush=True,
        )
    return steps


def warmup(optimizer: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate rises linearly over `steps` steps to the optimizer's, then stays."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / steps) if steps else 1.0
    )


def _quiet(*args, **kwargs) -> None:
    """Every rank but 0 prints nothing."""


@dataclass
class TrainingRun:
    """One run: its settings, its parts, where it is and what it measured."""

    args: argparse.Namespace
    strategy: object  # strategies.DDPStrategy or FSDPStrategy
    rank: int
    world_size: int
    global_batch: int
    lr: float
    steps_per_epoch: int
    max_steps: int
    log: object = print
    model: torch.nn.Module | None = None
    optimizer: torch.optim.Optimizer | None = None
    scheduler: torch.optim.lr_scheduler.LambdaLR | None = None
    sampler: ResumableSampler | None = None
    loader: DataLoader | None = None
    parameters: int = 0
    tokens_per_example: int = 1  # 1 for an image's label
    warmup_steps: int = 0
    flops_per_step: int = 0
    peak_flops: float | None = None
    epoch: int = 0  # the epoch, the step within it, the steps in all
    step: int = 0
    done: int = 0
    steps_this_run: int = 0
    step_times: list[float] = field(default_factory=list)
    epoch_losses: list[float] = field(default_factory=list)
    test_loss: float = float("nan")
    test_accuracy: float = float("nan")
    stopped: bool = False  # by a signal

    def save(self) -> None:
        """A checkpoint of the weights, optimizer, schedule and position."""
        progress = {"epoch": self.epoch, "step": self.step, "global_step": self.done}
        progress["world_size"] = self.world_size
        self.strategy.save(self.model, self.optimizer, self.scheduler, progress)


def plan(args, strategy, train: TensorDataset) -> TrainingRun:
    """The run's numbers: the global batch, the learning rate by the linear rule, steps."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    global_batch = args.batch_per_device * world_size
    steps_per_epoch = len(train) // world_size // args.batch_per_device
    return TrainingRun(
        args,
        strategy,
        rank,
        world_size,
        global_batch=global_batch,
        lr=args.lr * global_batch / args.base_batch,  # the linear rule
        steps_per_epoch=steps_per_epoch,
        max_steps=args.max_steps or args.epochs * steps_per_epoch,
        log=print if rank == 0 else _quiet,
    )


def build(run: TrainingRun, train: TensorDataset, classes: int) -> None:
    """The model (counted and measured first), its wrapper, optimizer, schedule and data."""
    args, strategy = run.args, run.strategy
    run.warmup_steps = warmup_length(args.warmup_steps, run.max_steps, run.log)
    seed_everything(args.seed, args.deterministic)
    bare = build_model(args, classes).to(strategy.device)
    run.parameters = sum(w.numel() for w in bare.parameters())
    run.tokens_per_example = train.tensors[1][0].numel()
    run.flops_per_step = training_flops(args, classes, *train[: args.batch_per_device])
    run.peak_flops = peak_flops(args, strategy.device, strategy.precision, run.log)
    if args.compile:
        strategy.compile(bare)  # compiled as the first steps run it
    run.model = strategy.wrap(bare)
    run.optimizer = build_optimizer(args, run.model, run.lr)
    run.scheduler = warmup(run.optimizer, run.warmup_steps)
    run.sampler = ResumableSampler(
        train, run.world_size, run.rank, shuffle=True, seed=args.seed, drop_last=True
    )
    run.loader = DataLoader(
        train,
        batch_size=args.batch_per_device,
        sampler=run.sampler,
        drop_last=True,  # equal batches on every rank
        num_workers=args.num_workers,
        pin_memory=strategy.device.type == "cuda",
        persistent_workers=args.num_workers > 0,
        worker_init_fn=_ignore_stop_signals,
        # each rank's workers their own random numbers (chapter 11): with the same seed
        # everywhere, every rank would draw the same random augmentation
        generator=torch.Generator().manual_seed(args.seed + run.rank),
    )


def agreed_checkpoint(strategy) -> bool:
    """Whether there is a checkpoint to resume from, once every rank has said which one it
    sees: ranks that see different ones (an --out that is not shared, a stale network
    file system) would load different states, or wait for each other forever."""
    seen = [None] * dist.get_world_size()
    dist.all_gather_object(seen, strategy.latest())
    if len(set(seen)) > 1:
        raise SystemExit(
            f"the processes see different checkpoints in {strategy.out} (rank by rank: "
            f"{seen}): --out must be one folder that every machine shares."
        )
    return seen[0] is not None


def resume(run: TrainingRun) -> None:
    """Continue from the checkpoint in --out, if there is one; with another number of
    processes the epoch starts again and the learning rate follows the new global batch."""
    try:
        if not agreed_checkpoint(run.strategy):
            return
        progress = run.strategy.restore(run.model, run.optimizer, run.scheduler)
    except (RuntimeError, ValueError, KeyError) as error:  # another model's or size's
        first = str(error).strip().splitlines()[0]
        raise SystemExit(
            f"the checkpoint in {run.args.out} does not fit this model ({first}): give this "
            "run another --out, or delete that folder to start over"
        ) from None
    run.epoch, run.step, run.done = progress["epoch"], progress["step"], progress["global_step"]
    run.log(f"resumed from {run.args.out}: epoch {run.epoch + 1}, step {run.step}", flush=True)
    if progress["world_size"] != run.world_size:  # restarted with more or fewer processes
        run.step = 0  # the data split differently: the epoch starts again
        run.scheduler.base_lrs = [run.lr] * len(run.scheduler.base_lrs)  # the rule, again
        for group in run.optimizer.param_groups:
            group["initial_lr"] = run.lr
            group["lr"] = run.lr * run.scheduler.lr_lambdas[0](run.done)
        run.log(
            f"saved by {progress['world_size']} processes, resumed by {run.world_size}: "
            f"epoch {run.epoch + 1} runs from its first step, learning rate {run.lr:g}",
            flush=True,
        )


def announce(run: TrainingRun, examples: tuple[int, int]) -> None:
    """What rank 0 says before the first step: processes, batch, learning rate, model."""
    args, strategy = run.args, run.strategy
    run.log(
        f"{strategy.recipe}: {run.world_size} process(es) on {strategy.device.type}, "
        f"{strategy.precision}; global batch {run.global_batch} = {args.batch_per_device} x "
        f"{run.world_size}; learning rate {run.lr:g} = {args.lr:g} x "
        f"{run.global_batch}/{args.base_batch}, warm-up {run.warmup_steps} steps; "
        f"{examples[0]} training, {examples[1]} test examples",
        flush=True,
    )
    run.log(
        f"{args.model}: {run.parameters:,} parameters, {run.flops_per_step / 1e9:.3g} GFLOP "
        "per step and process (forward and backward)",
        flush=True,
    )


def train_epoch(run: TrainingRun, stop: StopFlag) -> float:
    """Train to the end of the epoch (or of --max-steps, or of a stop signal: every rank
    stops after the same step); the epoch's mean loss (NaN if it had no step left)."""
    args, device = run.args, run.strategy.device
    run.sampler.set_epoch(run.epoch)  # a new shuffle each epoch, the same on every rank
    run.sampler.skip = run.step * args.batch_per_device
    losses, tick = [], time.perf_counter()
    for inputs, targets in run.loader:
        inputs = inputs.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with run.strategy.autocast():
            loss = loss_of(run.model(inputs), targets)
        run.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        run.optimizer.step()
        run.scheduler.step()
        run.step, run.done, run.steps_this_run = run.step + 1, run.done + 1, run.steps_this_run + 1
        # One small all-reduce per step: the summed loss, and whether any rank was
        # signalled to stop (so that they all stop after the same step).
        shared = torch.stack([loss.detach(), torch.tensor(float(stop.received), device=device)])
        dist.all_reduce(shared)
        mean_loss, stopping = shared[0].item() / run.world_size, shared[1].item() > 0
        losses.append(mean_loss)
        now = time.perf_counter()
        if len(losses) > 1:  # not the first step of an epoch: it waits for the loader
            run.step_times.append(now - tick)
        tick = now
        if run.step % args.log_every == 0 or run.step == 1:
            run.log(
                f"epoch {run.epoch + 1} step {run.step}/{run.steps_per_epoch} loss {mean_loss:.4f}",
                flush=True,
            )
        if stopping or run.done >= run.max_steps:
            run.stopped = stopping
            break
    if not losses:
        return float("nan")
    run.epoch_losses.append(sum(losses) / len(losses))
    return run.epoch_losses[-1]


@torch.no_grad()
def evaluate(model, test: TensorDataset, batch: int, strategy, rank: int, world_size: int):
    """Loss and accuracy (of each label, or each token) on the test set: each rank takes
    every world_size-th example, and the sums are all-reduced. Every rank runs the same
    number of batches (FSDP needs it)."""
    inputs, targets = test.tensors
    n = len(targets)
    indices = torch.arange(rank, -(-n // world_size) * world_size, world_size)
    counted = indices < n  # the padding that evens out the shares is not counted
    indices = indices.clamp(max=n - 1)
    totals = torch.zeros(3, dtype=torch.float64, device=strategy.device)
    model.eval()
    for part, keep in zip(indices.split(batch), counted.split(batch)):
        x, y = inputs[part].to(strategy.device), targets[part].to(strategy.device)
        keep = keep.to(strategy.device)
        with strategy.autocast():
            logits = model(x).float()
        losses = loss_of(logits, y, reduction="none").view(y.shape)
        keep = keep.view(-1, *[1] * (y.dim() - 1)).expand(y.shape)  # each token of an example
        right = (logits.argmax(-1) == y) & keep
        totals += torch.stack([(losses * keep).sum(), right.sum(), keep.sum()]).double()
    model.train()
    dist.all_reduce(totals)  # sums over the ranks
    return (totals[0] / totals[2]).item(), (totals[1] / totals[2]).item()


def fit(args, strategy, train: TensorDataset, test: TensorDataset, stop: StopFlag) -> None:
    """Train, checkpoint, resume, stop cleanly on a signal, and report (rank 0)."""
    run = plan(args, strategy, train)
    build(run, train, classes=int(torch.cat([train.tensors[1], test.tensors[1]]).max()) + 1)
    resume(run)
    announce(run, (len(train), len(test)))
    if strategy.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(strategy.device)
    while run.epoch < args.epochs and run.done < run.max_steps:
        train_loss = train_epoch(run, stop)
        if run.stopped:
            run.save()
            run.log(
                f"stop signal: checkpoint saved after epoch {run.epoch + 1} step {run.step}; "
                "start the same command again to resume.",
                flush=True,
            )
            return
        run.test_loss, run.test_accuracy = evaluate(
            run.model, test, args.batch_per_device, strategy, run.rank, run.world_size
        )
        run.log(
            f"epoch {run.epoch + 1} step {run.step}: train loss {train_loss:.4f}, test loss "
            f"{run.test_loss:.4f}, test accuracy {run.test_accuracy:.4f}",
            flush=True,
        )
        if run.step >= run.steps_per_epoch:
            run.epoch, run.step = run.epoch + 1, 0  # the checkpoint says: the next epoch
        run.save()
    finish(run)


def finish(run: TrainingRun) -> None:
    """The whole weights to OUT/model.pt and one results row to --results (rank 0)."""
    weights = run.strategy.whole_weights(run.model)  # a collective for FSDP: all ranks call it
    if run.rank == 0:
        run.strategy.write_weights(weights)
    if not run.steps_this_run:
        run.log(
            f"nothing to train: the checkpoint in {run.args.out} has {run.done} steps "
            "already; raise --epochs or use another --out."
        )
        return
    if run.rank == 0:
        append_result(run.args.results, results_row(run))
        print(f"results appended to {run.args.results}; weights in {run.strategy.out / 'model.pt'}")
