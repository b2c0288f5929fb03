"""The one check of `--model` and `--data`: every trial worker runs it when it starts (worker.py),
and `acspeed-tune --dry-run` runs it without torchrun, as

    python -m acspeed._worker.check --model M --batch-size N --image-size S [--data D]
        [--trajectory-steps T] --start-dir DIR --world-size W

with the workers' own arguments (tuner/src/worker_module.h names this module). It imports and
resolves the model (models.py) and the data (batches.py), builds the model once on the CPU, makes
the batches a worker makes (as rank 0 of W) and runs the first one through the model and the loss.
It prints one line and exits 0, or prints the usage error and exits 2."""
import argparse
import sys
import time

import torch

from acspeed._worker import batches, models, steps, user_code

EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that say what the workers train, which both the workers and the check take."""
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--data", help="pkg.module:function (rank, world_size, batch_size) -> iterable of "
                        "(inputs, targets): the batches of the trials and trajectories (acspeed._worker.batches)")
    parser.add_argument("--trajectory-steps", type=int, default=0, help="steps of the convergence guard's "
                        "trajectories: the batches made at start-up")
    parser.add_argument("--seed", type=int, help="the session's seed: the workers seed torch's generators with it "
                        "before they build the model, so sessions with the same seed start from the same weights")
    parser.add_argument("--start-dir", help="the folder acspeed-tune was started in: relative --model and --data "
                        "files and modules are found from there (default: the current folder)")


def _first_batch(args, make_batch):
    """make_batch(batch_size), checked to be (inputs, targets) tensors."""
    call = f"make_batch({args.batch_size})"
    try:
        batch = make_batch(args.batch_size)
    except models.ModelSpecError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's code: named in the message
        raise models.ModelSpecError(f"--model '{args.model}': {call} raised {type(error).__name__}: {error}") \
            from error
    prefix = f"--model '{args.model}': "
    batches.check_pair(batch, call, prefix, prefix, models.ModelSpecError)
    return tuple(batch)


def model_and_batches(args, rank: int, world_size: int):
    """(model, first batch, the trajectories' batches) as this rank's worker trains them, on the CPU:
    the user's --data, or the model's make_batch and the synthetic sequence (batches.py)."""
    model, make_batch = models.build_model(args.model, args.image_size, args.start_dir)
    count = max(1, args.trajectory_steps)
    if args.data:
        made = batches.from_data(args.data, rank, world_size, args.batch_size, count, args.start_dir)
        return model, made[0], made
    first = _first_batch(args, make_batch)
    return model, first, batches.synthetic(first, count, rank)


def model_fits(args, model: torch.nn.Module, batch) -> None:
    """The model takes `batch` and the loss its targets (no weight changes): else the usage error of
    the option that gave the batch."""
    if args.data:
        batches.check_model_fits(args.data, model, batch, steps.loss_of)
    else:
        batches.check_model_fits(args.model, model, batch, steps.loss_of, option="--model",
                                 error=models.ModelSpecError)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m acspeed._worker.check", description=__doc__.split("\n")[0])
    add_arguments(parser)
    parser.add_argument("--precision", help="accepted for the workers' argument list; the check runs in fp32")
    parser.add_argument("--world-size", type=int, default=1, help="the ranks --data is called for (as rank 0)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        model, first, _ = model_and_batches(args, 0, args.world_size)
        model_fits(args, model, first)
    except (models.ModelSpecError, batches.DataSpecError) as error:
        print(error, file=sys.stderr, flush=True)
        return EXIT_USAGE
    parameters = sum(p.numel() for p in model.parameters())
    source = f" from --data {args.data}" if args.data else ""
    print(f"model check: {args.model} ({parameters:,} parameters) built on the CPU; its first batch"
          f"{source} (inputs {user_code.describe(first[0])}) through forward and loss: ok "
          f"({time.perf_counter() - start:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
