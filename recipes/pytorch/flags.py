"""The command line both PyTorch recipes share: every flag, its default and its check, and
the checks that need several flags at once."""

from __future__ import annotations

import argparse


def at_least(least: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number; got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}; got {value}")
        return value

    return parse


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number; got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive; got {value:g}")
    return value


def fraction(text: str) -> float:
    value = positive_float(text)
    if not value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1; got {value:g}")
    return value


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """--help with each flag's default, where it has one (a flag without says its own)."""

    def _get_help_string(self, action) -> str:
        return action.help if action.default is None else super()._get_help_string(action)


def make_parser(recipe: str, description: str) -> argparse.ArgumentParser:
    """The flags both PyTorch recipes share."""
    parser = argparse.ArgumentParser(
        prog=f"torchrun --nproc_per_node=N {recipe}.py",
        description=description,
        formatter_class=_Help,
    )
    add = parser.add_argument
    training_flags(add)
    model_and_data_flags(add)
    run_flags(add, recipe)
    return parser


def training_flags(add) -> None:
    """The model, the length of training, the batch and the learning rate."""
    add(
        "--model",
        choices=["cnn", "transformer"],
        default="cnn",
        help="cnn: the book's small CNN on images; transformer: a small decoder-only "
        "transformer predicting the next character of the Python standard library's sources",
    )
    add("--epochs", type=at_least(1), default=5, help="passes over the training set")
    add(
        "--batch-per-device",
        type=at_least(1),
        default=64,
        help="examples per process and step; global batch = this x number of processes",
    )
    add(
        "--lr",
        type=positive_float,
        help="learning rate tuned for --base-batch (default: 0.05 for the CNN's SGD, 0.001 "
        "for the transformer's AdamW); scaled linearly to the global batch",
    )
    add("--base-batch", type=at_least(1), default=64, help="the global batch --lr was tuned for")
    add(
        "--warmup-steps",
        type=at_least(0),
        default=50,
        help="steps over which the learning rate rises linearly to its scaled value",
    )


def model_and_data_flags(add) -> None:
    """The examples, and the transformer's size."""
    add(
        "--images",
        metavar="FOLDER",
        help="your own images, one subfolder per class (default: the bundled digits)",
    )
    add("--test-fraction", type=fraction, default=0.1, help="held-out share of the examples")
    add("--context", type=at_least(1), default=128, help="transformer: tokens per sequence")
    add("--width", type=at_least(1), default=256, help="transformer: the model's width")
    add("--layers", type=at_least(1), default=4, help="transformer: blocks")
    add("--heads", type=at_least(1), default=4, help="transformer: attention heads")
    add(
        "--text-bytes",
        type=at_least(2),
        default=4_000_000,
        help="transformer: bytes of the standard library's sources to train and test on",
    )


def run_flags(add, recipe: str) -> None:
    """Where the run writes, how it measures, and what the tests shorten."""
    add(
        "--peak-tflops",
        type=positive_float,
        help="the device's peak, for MFU (default: the vendor's figure for known GPUs, a "
        "measured matrix product on CPUs)",
    )
    add("--out", default=f"runs/{recipe}", help="folder for checkpoints and final weights")
    add("--results", default="results.jsonl", help="JSON-lines file rank 0 appends to")
    add("--seed", type=int, default=0, help="initial weights and shuffling")
    add(
        "--num-workers",
        type=at_least(0),
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
    add(
        "--compile",
        action="store_true",
        help="torch.compile the model before DDP or FSDP2 wraps it (DDP: the whole model, "
        "its graph split at DDP's buckets, chapter 17; FSDP2: the forward of each block, or "
        "of each layer with weights; the first steps are slower while it compiles)",
    )
    add("--log-every", type=at_least(1), default=20, help="print the loss every N steps")
    add("--max-steps", type=at_least(1), help="stop after this many steps in all (tests)")
    add("--limit-examples", type=at_least(2), help="use only the first N examples (tests)")


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
