"""Which loss signal lets the convergence guard's short trajectories see what long runs see?
(issue 26) On resnet18 / scikit-learn's digits (--model: a 1000- or a 10-output head), 2 ranks on
gloo (loopback: only the numerics matter here, not the speed), this records the guard's trajectories
with the worker's own model, batches and optimizer (acspeed._worker.worker.Trainer: --data digits:batches,
SGD lr 0.01 momentum 0.9, compression from the first step) for DDP's defaults, fp16 and PowerSGD at
--ranks, and two signals per step:

    train      the loss of the step's own batch (what the guard judges today);
    held_out   the loss on --held-out-batches fixed batches per rank of digits' test split, never
               trained on, with batch statistics like the training loss (BatchNorm's running
               buffers are put back after each evaluation, so the training is the same).

Then `acspeed-tune inflation --json` (the tuner's own rule) judges each compressed curve against the
uncompressed one on the first --steps and on all --long-steps steps, per signal.

    python3 bench/compression/guard_signals.py [--ranks 1,4,8,16,32]    # about 3 min on 2 cores
    python3 bench/compression/guard_signals.py --from results/FILE.json # re-judge recorded curves
"""
import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import types

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
SIGNALS = ("train", "held_out")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="digits:model", choices=("digits:model", "digits:model10"),
                        help="resnet18 with 1000 outputs, or with a 10-class head (bench/compression/digits.py)")
    parser.add_argument("--ranks", default="1,4,8,16,32", help="PowerSGD ranks")
    parser.add_argument("--steps", type=int, default=60,
                        help="the shorter length judged (acspeed-tune's default before e014c63)")
    parser.add_argument("--long-steps", type=int, default=120, help="the longer length judged for agreement")
    parser.add_argument("--held-out-batches", type=int, default=4, help="test batches per rank of the held_out signal")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--from", dest="from_json", help="judge the curves of a result this script wrote")
    parser.add_argument("--out", default=str(HERE / "results" / "guard_signals.json"))
    return parser.parse_args()


def configs(ranks: str) -> dict:
    out = {"none": {"compression": "none"}, "fp16": {"compression": "fp16"}}
    for rank in ranks.split(","):
        out[f"powersgd rank {int(rank)}"] = {"compression": "powersgd", "powersgd_rank": int(rank),
                                             "powersgd_start_step": 0}
    return out


def _child(rank: int, world: int, port: int, target, args, queue) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world), OMP_NUM_THREADS="1")
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    out = target(rank, world, args)
    if rank == 0:
        queue.put(out)
    dist.destroy_process_group()


def on_two_ranks(target, args, timeout: int = 3600):
    """target(rank, world_size, args) in 2 spawned processes on gloo (loopback, one thread each, the
    process group initialised): rank 0's return value. `target` must be a module-level function."""
    import torch.multiprocessing as mp  # noqa: PLC0415
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    context = mp.get_context("spawn")
    queue = context.Queue()
    processes = [context.Process(target=_child, args=(r, 2, port, target, args, queue)) for r in range(2)]
    for p in processes:
        p.start()
    out = queue.get(timeout=timeout)
    for p in processes:
        p.join()
    return out


def _record(rank: int, world: int, args) -> dict:
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    from acspeed import _runtime  # noqa: PLC0415
    from acspeed._worker import steps, worker  # noqa: PLC0415
    import digits  # noqa: PLC0415
    group = dist.new_group(backend="gloo")
    trainer = worker.Trainer(types.SimpleNamespace(model=args.model, batch_size=args.batch_size, image_size=32,
                                                   precision="fp32", data="digits:batches",
                                                   trajectory_steps=args.long_steps, start_dir=str(HERE)),
                             torch.device("cpu"))
    _, (images, labels) = digits.split()
    size, count = args.batch_size, args.held_out_batches
    first = rank * size * count
    held_out = [(images[first + k * size:first + (k + 1) * size], labels[first + k * size:first + (k + 1) * size])
                for k in range(count)]
    model = trainer.model

    def held_out_loss() -> float:
        buffers = {name: b.clone() for name, b in model.named_buffers()}
        with torch.no_grad():
            loss = sum(float(torch.nn.functional.cross_entropy(model(x), y)) for x, y in held_out) / count
            for name, b in model.named_buffers():
                b.copy_(buffers[name])
        return loss

    curves = {}
    for name, fields in configs(args.ranks).items():
        config, _ = _runtime.core().CommConfig.from_json(json.dumps({"version": 2, **fields}))
        trainer.rewrap(config, "ddp")
        optimizer, _ = steps.training(trainer.ddp.parameters(), "fp32", torch.device("cpu"))  # the worker's
        train, held = [], []
        for inputs, targets in trainer.batches[:args.long_steps]:
            held.append(held_out_loss())  # the weights the step's loss is taken at
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(trainer.ddp(inputs), targets)
            loss.backward()
            optimizer.step()
            train.append(float(loss.detach()))
        both = torch.tensor([train, held], dtype=torch.float64)
        dist.all_reduce(both, group=group)
        both /= world
        curves[name] = dict(zip(SIGNALS, both.tolist()))
    return curves


def judge(curves: dict, steps: int, binary: pathlib.Path) -> dict:
    """{signal: {numerics: acspeed-tune inflation's JSON}} on the first `steps` steps."""
    out = {}
    with tempfile.TemporaryDirectory() as work:
        for signal in SIGNALS:
            reference = pathlib.Path(work) / f"none-{signal}.json"
            reference.write_text(json.dumps(curves["none"][signal]))
            out[signal] = {}
            for name, curve in curves.items():
                if name == "none":
                    continue
                path = pathlib.Path(work) / "compressed.json"
                path.write_text(json.dumps(curve[signal]))
                result = subprocess.run([str(binary), "inflation", str(path), str(reference), "--steps", str(steps),
                                         "--seed", "1", "--json"], capture_output=True, text=True, check=True)
                out[signal][name] = json.loads(result.stdout)
    return out


def cell(judged: dict) -> str:
    inflation, loss = judged["inflation"], judged["loss_check"]
    if inflation["kind"] == "measured":
        high = inflation.get("high")
        text = f"{inflation['estimate']:.2f} [{inflation['low']:.2f}, {'inf' if high is None else f'{high:.2f}'}]"
    else:
        text = inflation["kind"]
    return f"{text}, {'pass' if loss['passed'] else 'FAIL'} ({loss['excess']:.3f} / {loss['allowed']:.3f})"


def main() -> int:
    args = parse_args()
    sys.path[:0] = [str(REPO / "python"), str(HERE), str(REPO / "bench" / "tuner")]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), str(HERE), os.environ.get("PYTHONPATH", "")])
    import bench_tuner  # noqa: PLC0415 - build_dir()
    binary = bench_tuner.build_dir() / "bin" / "acspeed-tune"
    if args.from_json:
        recorded = json.loads(pathlib.Path(args.from_json).read_text())
        curves, args.steps, args.long_steps = recorded["curves"], recorded["steps"], recorded["long_steps"]
        recorded_args = recorded["args"]  # how the curves were recorded
    else:
        curves = on_two_ranks(_record, args)
        recorded_args = vars(args)
    judged = {str(steps): judge(curves, steps, binary) for steps in (args.steps, args.long_steps)}
    pathlib.Path(args.out).write_text(json.dumps({
        "what": "loss per step (mean over 2 ranks) of the guard's trajectories on resnet18 / digits, two signals; "
                "judged by acspeed-tune inflation", "steps": args.steps, "long_steps": args.long_steps,
        "args": recorded_args, "curves": curves, "judged": judged}, indent=1) + "\n")
    print("inflation [95% interval], loss check (tail excess / allowed)")
    print(f"| numerics | signal | T = {args.steps} | T = {args.long_steps} |\n|---|---|---|---|")
    for name in curves:
        if name != "none":
            for signal in SIGNALS:
                print(f"| {name} | {signal} | " +
                      " | ".join(cell(judged[str(s)][signal][name]) for s in (args.steps, args.long_steps)) + " |")
    print(f"raw curves and verdicts: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
