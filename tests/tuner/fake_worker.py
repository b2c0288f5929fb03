#!/usr/bin/env python3
"""Plays rank 0 of `python -m torch.distributed.run ... -m acspeed._worker.worker ... --control PATH` for the
trial runner's GoogleTest, without torch: WorkerLaunch.python points here. FAKE_WORKER_MODE:
  ok             every trial succeeds with step times [0.1, 0.2, 0.3]
  crash:ID       trial ID kills the process (exit 3) after printing the worker's failure line
  hang:ID        trial ID never answers
  fatal_usage    setup fails: the --model names nothing buildable
  never_connect  never connects to the tuner (sleeps)
  fast_streams   like ok, but a config with more than one stream steps twice as fast
  fast_sockets   like ok, but a config with NCCL sockets (nccl_sockets) steps twice as fast
  link           two nodes with a probe, steps timed as the step model's physics (tuner/include/acspeed/tuner/step_model.h):
                 compute 100 ms (forward + optimizer 40 ms), latency 2 ms per bucket, 125 MB/s, 46.8 MB
                 of gradients (one 11700x1000 fp32 matrix, as the hello says); head 85 ms (fp16: 130 ms;
                 powersgd: 95 ms plus its own compute of 15 ms, three collectives per bucket, its
                 factors on the wire, and 20 ms of that compute inside its communication spans); the
                 hook's buckets are reported; fp16 configs' cores are busy 200 ms per step (cpu_floor_s)
  compressors    every compression is faster; fp16 converges like the uncompressed run, powersgd ends
                 10x higher (the harmful compressor) with a low gradient fidelity and a trajectory
                 that learns nothing
Trajectories (a request's trajectory_steps T > 0): the loss falls linearly from 2.3 to 0.3 over the
first third of the T steps, then stays (a small deterministic ripple on top), every config alike;
FAKE_WORKER_STRETCH=COMPRESSION:F stretches that compression's curve F times in steps (step
inflation F, tuner/include/acspeed/tuner/inflation.h; its tail still reaches 0.3 for F < 3).
FAKE_WORKER_LAG=COMPRESSION:GAP:TAU: noisy trajectories instead, as guard_test.cc's noisy(): the loss
falls from 2.3 towards 0.3 (e-folding 20 steps) plus noise uniform in +-0.175 from splitmix64 (seed 1
for the uncompressed runs, 2 for the others), and COMPRESSION's runs lag by GAP x exp(-t / TAU)
(TAU inf: a lag that never closes).
FAKE_WORKER_SPEED=COMPRESSION:S (mode compressors): that compression's steps are S times faster than
the uncompressed ones (default fp16 2, powersgd 3). FAKE_WORKER_PSGD=faithful (mode compressors):
powersgd is as faithful as fp16 (its window and trajectory pass).
FAKE_WORKER_CRASH=ID: trial ID kills the process as crash:ID does, whatever the mode.
FAKE_WORKER_SLOW=ID:F[,ID:F...]: trial ID's steps take F times as long (one noisy run in a decision's pairs).
FAKE_WORKER_GUARD_S=S: every trajectory takes S seconds whatever its steps (the worker sleeps) and reports
trajectory_s as a real worker times it.
A mode applies to the first launch only when FAKE_WORKER_ONCE=PATH names a marker file.
FAKE_WORKER_GATE=ID:PATH: before answering trial ID (or crashing or hanging in it) the worker creates
PATH.reached and waits until PATH exists (a test acts on the store, or as another node, while a trial
is in flight, then lets it go on).
FAKE_WORKER_HELLO: a JSON object of hello fields to report instead (model_signature, world_size...).
FAKE_WORKER_NCCL / FAKE_WORKER_CUDA: the torch NCCL / CUDA versions the hello reports (default "").
FAKE_WORKER_ENV_LOG=PATH: each launch appends one line with what it got of ACSPEED_NCCL_SOCKETS,
NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD ("-" where unset), space-separated.
FAKE_WORKER_NCCL_NET=NAME: as NCCL does under NCCL_DEBUG=INFO with its INIT subsystem, each launch
writes NCCL's INFO line "Using network NAME" (src/init.cc; its prefix as src/debug.cc prints it) to
NCCL_DEBUG_FILE, %h and %p expanded; nothing without NCCL_DEBUG=INFO."""
import importlib.util
import json
import math
import os
import pathlib
import socket
import sys
import time

# The worker's protocol module, by its path: importing the acspeed package would patch DDP (torch).
_spec = importlib.util.spec_from_file_location(
    "acspeed_protocol", pathlib.Path(__file__).resolve().parents[2] / "python" / "acspeed" / "_worker" / "protocol.py")
protocol = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(protocol)

argv = sys.argv
# The worker module the tuner launched (`... -m torch.distributed.run ... -m MODULE`): its failure lines name it.
worker_module = argv[[i for i, arg in enumerate(argv) if arg == "-m"][-1] + 1]
control = argv[argv.index("--control") + 1]
mode = os.environ.get("FAKE_WORKER_MODE", "ok")
once = os.environ.get("FAKE_WORKER_ONCE")
if once:
    if os.path.exists(once):
        mode = "ok"
    else:
        open(once, "w").close()
if mode == "never_connect":
    time.sleep(3600)
gate_id, _, gate_path = os.environ.get("FAKE_WORKER_GATE", "").partition(":")
if os.environ.get("FAKE_WORKER_ENV_LOG"):
    with open(os.environ["FAKE_WORKER_ENV_LOG"], "a") as env_log:
        env_log.write(" ".join(os.environ.get(name, "-") for name in
                               ("ACSPEED_NCCL_SOCKETS", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD")) + "\n")
if os.environ.get("FAKE_WORKER_NCCL_NET") and os.environ.get("NCCL_DEBUG") == "INFO":
    host, pid = socket.gethostname(), os.getpid()
    path = os.environ["NCCL_DEBUG_FILE"].replace("%h", host).replace("%p", str(pid))
    with open(path, "w") as nccl_log:
        nccl_log.write(f"{host}:{pid}:{pid} [0] NCCL INFO Bootstrap: Using lo:127.0.0.1<0>\n"
                       f"{host}:{pid}:{pid} [0] NCCL INFO Using network {os.environ['FAKE_WORKER_NCCL_NET']}\n")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(control)
reader = sock.makefile("r")


def send(message):
    sock.sendall(protocol.encode(message))


if mode == "fatal_usage":
    send(protocol.fatal("--model 'nope' is not a torchvision classification model", usage=True))
    sys.exit(1)
link = mode == "link"
send(protocol.hello(**{
    "world_size": 2, "nnodes": 2 if link else 1, "local_world_size": 1 if link else 2,
    "backend": "gloo", "device": "cpu", "model": "fake", "model_signature": "p1-0000000000000001",
    "param_count": 10, "param_bytes": 40, "torch_version": "2.15.0",
    "nccl_version": os.environ.get("FAKE_WORKER_NCCL", ""), "cuda_version": os.environ.get("FAKE_WORKER_CUDA", ""),
    "batch_size": 8, "precision": "fp32", "probe": "fake" if link else "",
    **({"gradients": {"matrices": [[11700, 1000, 4, 1]], "vectors": []}} if link else {}),
    **json.loads(os.environ.get("FAKE_WORKER_HELLO", "{}"))}))


def link_result(request):
    """A step of the `link` mode's physics."""
    config, payload = request["config"], 46_800_000
    if request.get("mode") == "compute":
        return {"step_times_s": [0.1] * 3, "forward_s": 0.03, "optimizer_s": 0.01}
    compression = config.get("compression", "none")
    fp16, psgd = compression == "fp16", compression == "powersgd"
    first, cap = (config.get("first_bucket_mb") or 1) * 2**20, (config.get("bucket_cap_mb") or 25) * 2**20
    buckets = 1 + -(-max(0, payload - first) // cap)
    sent = (11700 + 1000) * min(config.get("powersgd_rank", 4), 1000) * 4 if psgd else payload * (0.5 if fp16 else 1)
    comm = buckets * (3 if psgd else 1) / config.get("streams", 1) * 0.002 + sent / 125e6
    out = {"step_times_s": [(0.13 if fp16 else 0.095 + 0.015 if psgd else 0.085) + comm] * 3}
    hooked = request.get("mode") == "hooked" or fp16 or psgd or config.get("streams", 1) > 1 or \
        config.get("algorithm", "allreduce") != "allreduce"
    if hooked:
        out.update(bucket_count=int(buckets), bucket_bytes=payload, comm_s=comm + (0.02 if psgd else 0), probe="fake")
    if psgd:
        out["compression_s"] = 0.015
    if fp16:
        out["cpu_floor_s"] = 0.2
    return out


def fidelity_window(request, faithful):
    """The gradient-fidelity figures when the request asks for the window, as a real worker."""
    steps = request.get("fidelity_steps", 0)
    if steps <= 0 or request["config"].get("compression", "none") == "none":
        return {}
    return {"fidelity_cosine": 0.999 if faithful else 0.3, "fidelity_norm_error": 0.01 if faithful else 0.6,
            "fidelity_step_cosine_min": 0.99 if faithful else 0.1, "fidelity_steps": steps}


def noisy(steps, seed, gap=0.0, tau=math.inf):
    """guard_test.cc's noisy(), the same numbers."""
    mask, x, losses = (1 << 64) - 1, seed, []
    for t in range(steps):
        x = (x + 0x9E3779B97F4A7C15) & mask
        z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        uniform = (z >> 11) * 2.0 ** -53
        losses.append(0.3 + 2 * math.exp(-t / 20) + gap * math.exp(-t / tau) + (uniform - 0.5) * 0.35)
    return losses


def trajectory(request):
    """The trajectory the request asks for, as a real worker (compression from its first step)."""
    steps = request.get("trajectory_steps", 0)
    if steps <= 0:
        return {}
    timed = {}
    if os.environ.get("FAKE_WORKER_GUARD_S"):
        timed["trajectory_s"] = float(os.environ["FAKE_WORKER_GUARD_S"])
        time.sleep(timed["trajectory_s"])
    return {**timed, **losses(request, steps)}


def losses(request, steps):
    """The trajectory's losses."""
    compression = request["config"].get("compression", "none")
    if os.environ.get("FAKE_WORKER_LAG"):
        name, gap, tau = os.environ["FAKE_WORKER_LAG"].split(":")
        if compression == "none":
            return {"trajectory": noisy(steps, 1)}
        return {"trajectory": noisy(steps, 2, float(gap), float(tau)) if compression == name else noisy(steps, 2)}
    name, _, factor = os.environ.get("FAKE_WORKER_STRETCH", ":1").partition(":")
    stretch = float(factor) if compression == name else 1.0
    return {"trajectory": [0.3 + 2 * max(0.0, 1 - t / (steps / 3) / stretch) + 0.002 * ((t * 7919) % 13 - 6) / 6
                           for t in range(steps)]}


for line in reader:
    request = protocol.decode(line)
    if request["type"] == "stop":
        sys.exit(0)
    if gate_id == str(request["id"]):
        open(gate_path + ".reached", "w").close()
        while not os.path.exists(gate_path):
            time.sleep(0.05)
    if mode == f"crash:{request['id']}" or os.environ.get("FAKE_WORKER_CRASH") == str(request["id"]):
        print(f"{worker_module} rank 0: trial {request['id']} failed: RuntimeError: boom", file=sys.stderr, flush=True)
        sys.exit(3)
    if mode == f"hang:{request['id']}":
        time.sleep(3600)
    if link:
        reply = protocol.result(request["id"], **link_result(request), loss=1.5, finite=True, losses=[2.0, 1.5, 1.5])
        reply.update(fidelity_window(request, True))
        reply.update(trajectory(request))
        send(reply)
        continue
    steps = [0.1, 0.2, 0.3]
    if mode == "fast_streams" and request["config"].get("streams", 1) > 1:
        steps = [t / 2 for t in steps]
    if mode == "fast_sockets" and request["config"].get("nccl_sockets"):
        steps = [t / 2 for t in steps]
    result = protocol.result(request["id"], step_times_s=steps, loss=1.5, finite=True)
    compression = request["config"].get("compression", "none")
    # as a real worker: every step's loss, and the fidelity window when asked (a faithful compressor here)
    result["losses"] = [2.0, 1.5, 1.5]
    result.update(fidelity_window(request, True))
    result.update(trajectory(request))
    if mode == "compressors":
        result["losses"] = {"none": [7.08, 1.0, 0.0406], "fp16": [7.08, 1.0, 0.0450],
                            "powersgd": [7.08, 2.0, 0.39]}[compression]
        result["loss"] = result["losses"][-1]
        faithful = compression == "fp16" or os.environ.get("FAKE_WORKER_PSGD") == "faithful"
        if compression != "none":
            name, _, speed = os.environ.get("FAKE_WORKER_SPEED", ":").partition(":")
            speedup = float(speed) if name == compression else 2 if compression == "fp16" else 3
            result["step_times_s"] = [t / speedup for t in steps]
            result.update(fidelity_window(request, faithful))
            if faithful:
                result["losses"], result["loss"] = [7.08, 1.0, 0.0450], 0.0450
        if compression == "powersgd":
            result["compression_s"] = 0.004
            if "trajectory" in result and not faithful:  # the harmful compressor learns nothing
                result["trajectory"] = [2.3] * len(result["trajectory"])
    slow = dict(item.split(":") for item in os.environ.get("FAKE_WORKER_SLOW", "").split(",") if item)
    if str(request["id"]) in slow:
        result["step_times_s"] = [t * float(slow[str(request["id"])]) for t in result["step_times_s"]]
    send(result)
