"""Records the loss trajectories of tests/tuner/fixtures/trajectories/test_models.json: the worker's own code
(acspeed._worker.convergence_guard.trajectory, on acspeed._worker.batches' synthetic teacher stream) on the test
models, 2 ranks on gloo, one trajectory of --steps steps per numerics (uncompressed, fp16, PowerSGD
ranks 1 and 4, compression from the first step). A trajectory of T steps is the prefix of a longer
one (same weights, same batches), so the GoogleTest `Inflation.VerdictAndInflationAgreeAcross
TwoTrajectoryLengthsOnTheTestModels` judges the first T and all steps of these, in-process.

    PYTHONPATH=python:tests/tuner:bench/compression python3 tests/tuner/record_trajectories.py
"""
import argparse
import json
import pathlib
import sys
import types

import torch
import torch.distributed as dist
from guard_signals import on_two_ranks  # bench/compression: the 2-rank gloo launcher both scripts use

HERE = pathlib.Path(__file__).resolve().parent
MODELS = ("tiny_models:mlp", "teacher:task")
CONFIGS = {"none": {"compression": "none"}, "fp16": {"compression": "fp16"},
           "powersgd rank 1": {"compression": "powersgd", "powersgd_rank": 1},
           "powersgd rank 4": {"compression": "powersgd", "powersgd_rank": 4}}


def _record(rank: int, world: int, args) -> dict:
    from acspeed import _runtime  # noqa: PLC0415 - after PYTHONPATH is set by the caller
    from acspeed._worker import convergence_guard, worker  # noqa: PLC0415
    group = dist.new_group(backend="gloo")
    out = {}
    for model in args.models.split(","):
        trainer_args = types.SimpleNamespace(model=model, batch_size=args.batch_size, image_size=32,
                                             precision="fp32", data=None, trajectory_steps=args.steps)
        trainer = worker.Trainer(trainer_args, torch.device("cpu"))
        for name in args.configs.split(","):
            fields = CONFIGS[name]
            config, _ = _runtime.core().CommConfig.from_json(json.dumps({"version": 2, **fields}))
            out[f"{model} {name}"] = convergence_guard.trajectory(trainer, config, group, args.steps)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", default=str(HERE / "fixtures" / "trajectories" / "test_models.json"))
    args = parser.parse_args()
    trajectories = on_two_ranks(_record, args, timeout=600)
    record = {"what": "loss per step (mean over 2 ranks) of acspeed._worker.worker trajectories on the synthetic teacher "
                      "stream, compression from the first step; recorded by tests/tuner/record_trajectories.py",
              "steps": args.steps, "batch_size": args.batch_size, "torch": torch.__version__,
              "trajectories": trajectories}
    pathlib.Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}: {', '.join(trajectories)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
