"""Records the loss trajectories of tests/tuner/fixtures/trajectories/test_models.json: the worker's own code
(acspeed.worker.Trainer._trajectory, on acspeed.batches' synthetic teacher stream) on the test
models, 2 ranks on gloo, one trajectory of --steps steps per numerics (uncompressed, fp16, PowerSGD
ranks 1 and 4, compression from the first step). A trajectory of T steps is the prefix of a longer
one (same weights, same batches), so the GoogleTest `Inflation.VerdictAndInflationAgreeAcross
TwoTrajectoryLengthsOnTheTestModels` judges the first T and all steps of these, in-process.

    PYTHONPATH=python:tests/tuner:bench/compression python3 tests/tuner/record_trajectories.py
"""
import argparse
import json
import os
import pathlib
import socket
import sys
import types

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = pathlib.Path(__file__).resolve().parent
MODELS = ("tiny_models:mlp", "teacher:task")
CONFIGS = {"none": {"compression": "none"}, "fp16": {"compression": "fp16"},
           "powersgd rank 1": {"compression": "powersgd", "powersgd_rank": 1},
           "powersgd rank 4": {"compression": "powersgd", "powersgd_rank": 4}}


def _rank(rank: int, world: int, port: int, args, queue) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world), OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from acspeed import _runtime, worker  # noqa: PLC0415 - after PYTHONPATH is set by the caller
    group = dist.new_group(backend="gloo")
    out = {}
    for model in args.models.split(","):
        trainer_args = types.SimpleNamespace(model=model, batch_size=args.batch_size, image_size=32,
                                             precision="fp32", data=None, trajectory_steps=args.steps)
        trainer = worker.Trainer(trainer_args, torch.device("cpu"))
        for name in args.configs.split(","):
            fields = CONFIGS[name]
            config, _ = _runtime.core().CommConfig.from_json(json.dumps({"version": 2, **fields}))
            out[f"{model} {name}"] = trainer._trajectory(config, group, args.steps)
    if rank == 0:
        queue.put(out)
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", default=str(HERE / "fixtures" / "trajectories" / "test_models.json"))
    args = parser.parse_args()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    context = mp.get_context("spawn")
    queue = context.Queue()
    processes = [context.Process(target=_rank, args=(r, 2, port, args, queue)) for r in range(2)]
    for p in processes:
        p.start()
    trajectories = queue.get(timeout=600)
    for p in processes:
        p.join()
    record = {"what": "loss per step (mean over 2 ranks) of acspeed.worker trajectories on the synthetic teacher "
                      "stream, compression from the first step; recorded by tests/tuner/record_trajectories.py",
              "steps": args.steps, "batch_size": args.batch_size, "torch": torch.__version__,
              "trajectories": trajectories}
    pathlib.Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}: {', '.join(trajectories)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
