"""One training job of the online benchmark (bench/online/bench_online.py): the seed benchmark's model
and synthetic batch (examples/Pytorch_ddp_benchmark.py's build_model), `import acspeed` as the one
line, DDP on gloo, SGD, --steps synchronised steps and no other work.

Whole-job time = wall time from just before DDP's construction (every rank leaves a barrier there)
to the end of the last step's optimizer step, maximum over ranks. Step i's time = the interval
between the ends of steps i - 1 and i (step 0: from DDP's construction), maximum over ranks per step.
ACSPEED_DISABLE=1 gives plain DDP. Rank 0 writes --json."""
import argparse
import datetime
import json
import os
import pathlib
import sys
import time

import acspeed  # noqa: F401  - the one line under test
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
from Pytorch_ddp_benchmark import build_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: at least 1")
    os.environ.setdefault("ACSPEED_PRECISION", "fp32")  # the lookup's key, as the seed benchmark sets it
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=30))
    torch.manual_seed(0)
    model, make_batch = build_model(args.model, args.image_size, torch.device("cpu"))
    inputs, targets = make_batch(args.batch_size)
    loss_fn = torch.nn.CrossEntropyLoss()
    dist.barrier()
    start = time.perf_counter()
    ddp = DDP(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    ends = []
    for _ in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        loss_fn(ddp(inputs), targets).backward()
        optimizer.step()
        ends.append(time.perf_counter())
    times = torch.tensor([ends[0] - start] + [b - a for a, b in zip(ends, ends[1:])] + [ends[-1] - start],
                         dtype=torch.float64)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)  # per step, and the whole job: the slowest rank's
    if dist.get_rank() == 0:
        record = {"whole_job_s": float(times[-1]), "step_times_s": [float(t) for t in times[:-1]],
                  "steps": args.steps, "world_size": dist.get_world_size(),
                  "acspeed_disabled": os.environ.get("ACSPEED_DISABLE") == "1", "torch": torch.__version__}
        pathlib.Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
