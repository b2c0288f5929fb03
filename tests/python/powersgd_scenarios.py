"""Worker-side scenarios for the PowerSGD tests (run inside ddp_harness ranks); each returns plain data."""
import copy
import json
import os
import zlib

import numpy as np
import torch
import torch.distributed as dist

import acspeed
import acspeed.apply
import acspeed._patch
from ddp_scenarios import Captured, batches, compare, environment, flat_params, make_model, plain_ddp, train

def config(**fields) -> str:
    return json.dumps({"version": 2, "compression": "powersgd", **fields})


def distinct_model() -> torch.nn.Module:
    """Matrices of different shapes, one of them below rank 4 on one side (17x5 ... 5x17)."""
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.Tanh(), torch.nn.Linear(40, 33), torch.nn.Tanh(),
                               torch.nn.Linear(33, 17), torch.nn.Tanh(), torch.nn.Linear(17, 5))


def gram_schmidt(p: np.ndarray) -> np.ndarray:
    p = p.copy()
    for i in range(p.shape[1]):
        norm = np.linalg.norm(p[:, i])
        p[:, i] = p[:, i] / norm if norm > 0 else 0.0
        for j in range(i + 1, p.shape[1]):
            p[:, j] -= np.dot(p[:, i], p[:, j]) * p[:, i]
    return p


def reference_step(shapes, grads, errors, q_flat, rank: int):
    """NumPy (float64) PowerSGD of one bucket over W ranks, as torch's powerSGD_hook computes it.
    grads[w][k], errors[w] (flat over the bucket's matrices), q_flat: the warm-start Q.
    Returns (averaged gradient per tensor, new error per rank, new Q)."""
    world = len(grads)
    out, new_q, new_errors = [], [], [[] for _ in range(world)]
    m_at = q_at = 0
    for k, shape in enumerate(shapes):
        g = [np.asarray(grads[w][k], dtype=np.float64) for w in range(world)]
        if len(shape) < 2:
            out.append(sum(g) / world)
            continue
        n, m = shape[0], int(np.prod(shape)) // shape[0]
        r = min(rank, n, m)
        q = np.asarray(q_flat[q_at:q_at + m * r], dtype=np.float64).reshape(m, r)
        mats = [g[w].reshape(n, m) + np.asarray(errors[w][m_at:m_at + n * m], dtype=np.float64).reshape(n, m)
                for w in range(world)]
        p = gram_schmidt(sum(mat @ q for mat in mats))
        q = sum(mat.T @ p for mat in mats) / world
        approx = p @ q.T
        out.append(approx.reshape(shape))
        for w in range(world):
            new_errors[w].append((mats[w] - approx).ravel())
        new_q.append(q.ravel())
        m_at, q_at = m_at + n * m, q_at + m * r
    flat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)  # noqa: E731
    return out, [flat(e) for e in new_errors], flat(new_q)


def _rel(got, want) -> float:
    want = np.asarray(want, dtype=np.float64)
    return float(np.abs(np.asarray(got, dtype=np.float64) - want).max() / max(np.abs(want).max(), 1e-30))


def reference(rank: int, world_size: int, algorithm: str, powersgd_rank: int, bucket_mb: float) -> dict:
    """Start step 1: each step's averaged gradients, the new error of every rank and the new Q of
    every matrix against reference_step fed with every rank's local gradients and state.
    hierarchical (nodes of LOCAL_WORLD_SIZE ranks): the factoring ranks are the L nodes' leaders (the
    lowest rank of each node), each with its node's sum times L/W as its gradient; the other ranks
    keep no state and get the same averaged gradients."""
    local_size = int(os.environ["LOCAL_WORLD_SIZE"]) if algorithm == "hierarchical" else 1
    leaders = list(range(0, world_size, local_size))
    ddp = acspeed.apply.wrap(distinct_model(), config(algorithm=algorithm, powersgd_rank=powersgd_rank,
                                                      powersgd_start_step=1, bucket_cap_mb=bucket_mb))
    local = distinct_model()
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    names = [name for name, _ in local.named_parameters()]
    worst = {"grad": 0.0, "error": 0.0, "q": 0.0}
    errors_seen = []
    for step, (x, y) in enumerate(batches(rank, 5)):
        local.load_state_dict(ddp.module.state_dict())
        local.zero_grad()
        torch.nn.functional.mse_loss(local(x), y).backward()
        mine = {name: p.grad.numpy().copy() for name, p in local.named_parameters()}
        before = acspeed.state_dict(ddp)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        got = {name: p.grad.numpy().copy() for name, p in ddp.module.named_parameters()}
        after = acspeed.state_dict(ddp)
        everyone = [None] * world_size
        dist.all_gather_object(everyone, (mine, before))
        optimizer.step()
        if step < 1:  # before the start step: plain allreduce, nothing kept
            assert not after["tensors"], after
            want = {name: sum(e[0][name] for e in everyone) / world_size for name in names}
            worst["grad"] = max(worst["grad"], max(_rel(got[n], want[n]) for n in names))
            continue
        if rank in leaders:
            assert sorted(after["tensors"]) == sorted(n for n in names if n.endswith("weight")), after["tensors"]
        else:
            assert not after["tensors"], after
        states = [everyone[leader][1]["tensors"] for leader in leaders]  # the factoring ranks' states
        for name in names:
            shape = mine[name].shape
            # each factoring rank's gradient: its node's sum, as the gradient of one of len(leaders) ranks
            grads = [[sum(e[0][name] for e in everyone[leader:leader + local_size]) * (len(leaders) / world_size)]
                     for leader in leaders]
            if len(shape) < 2:
                want, _, _ = reference_step([shape], grads, [np.zeros(0)] * len(leaders), np.zeros(0), powersgd_rank)
                worst["grad"] = max(worst["grad"], _rel(got[name], want[0]))
                continue
            if name in states[0]:
                q0 = states[0][name]["q"].numpy().ravel()
                errors = [state[name]["error"].numpy().ravel() for state in states]
            else:  # the first Q: torch.randn seeded by the parameter's name (powersgd.initial_q)
                r = min(powersgd_rank, shape[0], int(np.prod(shape[1:])))
                q0 = torch.randn(int(np.prod(shape[1:])), r,
                                 generator=torch.Generator().manual_seed(zlib.crc32(name.encode()))).numpy().ravel()
                errors = [np.zeros(int(np.prod(shape)))] * len(leaders)
            want, want_errors, want_q = reference_step([shape], grads, errors, q0, powersgd_rank)
            worst["grad"] = max(worst["grad"], _rel(got[name], want[0]))
            if rank in leaders:
                worst["error"] = max(worst["error"], _rel(after["tensors"][name]["error"].numpy().ravel(),
                                                          want_errors[leaders.index(rank)]))
                worst["q"] = max(worst["q"], _rel(after["tensors"][name]["q"].numpy().ravel(), want_q))
        if rank in leaders:
            errors_seen.append(max(float(t["error"].abs().max()) for t in after["tensors"].values()))
    state = acspeed._patch.state_of(ddp)
    return {"worst": worst, "errors": errors_seen, "steps": after["step"],
            "compressed_buckets": state.powersgd.compressed_buckets, "compute_s": len(state.powersgd.compute_s)}


def combos(rank: int, world_size: int, names: list) -> dict:
    """Each (algorithm, streams, bucket) trains 6 steps with start step 2 from the same start; reports
    its parameters' distance from plain DDP's and from the first combo's"""
    captured = Captured()
    start = flat_params(make_model())
    base = train(plain_ddp(make_model()), rank, steps=6)
    out, firsts = {}, {}
    for algorithm, streams, bucket in names:
        name = f"{algorithm}/s{streams}/b{bucket}"
        with environment(ACSPEED_STRICT="1"):
            ddp = acspeed.apply.wrap(make_model(), config(algorithm=algorithm, streams=streams, bucket_cap_mb=bucket,
                                                          powersgd_rank=2, powersgd_start_step=2))
            result = train(ddp, rank, steps=6)
        state = acspeed._patch.state_of(ddp)
        out[name] = compare(result, base, start)
        out[name]["compressed_buckets"] = state.powersgd.compressed_buckets
        out[name]["lanes"] = len(state.lanes)
        first = firsts.setdefault("any", result)
        out[name]["same_as_first"] = bool(torch.equal(result, first))
        out[name]["rel_to_first"] = compare(result, first, start)["rel_to_update"] if result is not first else 0.0
        del ddp
    out["_log"] = captured.take()
    return out


def resumption(rank: int, world_size: int) -> dict:
    """6 steps in one run against 3 steps, a checkpoint (model, optimizer, acspeed.state_dict), and 3
    steps in a fresh DDP after loading it; and the same without acspeed's state."""
    text = config(bucket_cap_mb=0.001, powersgd_rank=1, powersgd_start_step=1)
    data = batches(rank, 6)

    def steps(ddp, optimizer, chunk):
        for x, y in chunk:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            optimizer.step()

    whole = acspeed.apply.wrap(make_model(), text)
    optimizer = torch.optim.SGD(whole.parameters(), lr=0.05, momentum=0.9)
    steps(whole, optimizer, data[:3])
    saved = copy.deepcopy((whole.module.state_dict(), optimizer.state_dict(), acspeed.state_dict(whole)))
    steps(whole, optimizer, data[3:])
    reference_params = flat_params(whole)
    error_norm = sum(float(t["error"].norm()) for t in saved[2]["tensors"].values())
    del whole

    out = {"saved_step": saved[2]["step"], "saved_tensors": len(saved[2]["tensors"]), "error_norm": error_norm}
    for label, load in (("with_state", True), ("without_state", False)):
        model = make_model()
        model.load_state_dict(saved[0])
        ddp = acspeed.apply.wrap(model, text)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        optimizer.load_state_dict(saved[1])
        if load:
            acspeed.load_state_dict(ddp, saved[2])
        steps(ddp, optimizer, data[3:])
        out[label] = bool(torch.equal(flat_params(ddp), reference_params))
        del ddp
    try:
        acspeed.load_state_dict(acspeed.apply.wrap(make_model(), config(powersgd_rank=3)), saved[2])
        out["wrong_rank"] = "accepted"
    except ValueError as error:
        out["wrong_rank"] = str(error)
    return out


def all_one_dimensional(rank: int, world_size: int) -> dict:
    """A model with only 1-D parameters: the plain path, said once."""
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(8))
            self.bias = torch.nn.Parameter(torch.zeros(8))

        def forward(self, x):
            return x * self.weight + self.bias

    captured = Captured()
    torch.manual_seed(0)
    reference_model, model = Scale(), Scale()
    ddp = acspeed.apply.wrap(model, config(powersgd_start_step=0))
    base = plain_ddp(reference_model)
    for step in range(3):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank * 10 + step))
        for m in (ddp, base):
            m.zero_grad()
            m(x).pow(2).sum().backward()
    same = all(torch.equal(a.grad, b.grad) for a, b in zip(ddp.parameters(), base.parameters()))
    return {"same_as_ddp": same, "compressed_buckets": acspeed._patch.state_of(ddp).powersgd.compressed_buckets,
            "log": [line for _, line in captured.take() if "1-D" in line]}


def _inject_inf(model: torch.nn.Module):
    """An Inf in the first weight's gradient (a matrix) on this rank, until removed."""
    def inject(grad):
        grad = grad.clone()
        grad[0, 0] = float("inf")
        return grad
    return next(model.parameters()).register_hook(inject)


def _state_tensors(ddp) -> dict:
    return {name: (t["q"].clone(), t["error"].clone()) for name, t in acspeed.state_dict(ddp)["tensors"].items()}


def _state_finite(ddp) -> bool:
    return all(bool(torch.isfinite(q).all() and torch.isfinite(e).all()) for q, e in _state_tensors(ddp).values())


def non_finite(rank: int, world_size: int) -> dict:
    """Rank 1's gradient holds an Inf at step 3 of 6 (start step 1, rank 2). Per case: which tensors'
    factors and residuals the bad step changed, whether the gradients of that step were finite, the
    non-finite fallbacks, whether the state and parameters stay finite, and (one bucket, no GradScaler:
    every tensor skips the bad step) whether the parameters equal a run that never saw that batch. The loop
    skips the optimizer on non-finite gradients (as a user's check would); with a GradScaler, the
    scaler does (and backs off). Run with LOCAL_WORLD_SIZE=1: two nodes, so hierarchical compresses."""
    bad_step, data = 3, batches(rank, 6)
    captured = Captured()
    out = {}
    cases = (("fallback/allreduce/b25", "allreduce", 25.0, False), ("fallback/allreduce/b0.001", "allreduce", 0.001, False),
             ("fallback/reduce_scatter/b25", "reduce_scatter", 25.0, False),
             ("fallback/hierarchical/b25", "hierarchical", 25.0, False),
             ("scaler/allreduce/b25", "allreduce", 25.0, True))  # last: a GradScaler, once used, stays detected
    for name, algorithm, bucket, with_scaler in cases:
        acspeed.configure(grad_scaler=None if with_scaler else False)
        text = config(algorithm=algorithm, bucket_cap_mb=bucket, powersgd_rank=2, powersgd_start_step=1)
        runs = {}
        exact = bucket == 25.0 and not with_scaler  # one bucket, no scale change: the batch left no trace
        for label, skip_batch in (("injected", False), ("reference", True))[:2 if exact else 1]:
            model = make_model()
            ddp = acspeed.apply.wrap(model, text)
            optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
            grad_scaler = torch.amp.GradScaler("cpu", init_scale=256.0, growth_interval=1000) if with_scaler else None
            result = {"scales": [], "finite_grads": [], "losses_finite": True}
            for step, (x, y) in enumerate(data):
                if step == bad_step and skip_batch:
                    continue
                before = _state_tensors(ddp)
                handle = _inject_inf(model) if step == bad_step and rank == 1 else None
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(ddp(x), y)
                result["losses_finite"] &= bool(torch.isfinite(loss))
                (grad_scaler.scale(loss) if grad_scaler is not None else loss).backward()
                if handle is not None:
                    handle.remove()
                finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
                result["finite_grads"].append(finite)
                if grad_scaler is not None:
                    grad_scaler.step(optimizer)
                    grad_scaler.update()
                    result["scales"].append(grad_scaler.get_scale())
                elif finite:
                    optimizer.step()
                if step == bad_step:
                    after = _state_tensors(ddp)
                    result["unchanged"] = sorted(n for n in after if n in before and all(
                        torch.equal(a, b) for a, b in zip(after[n], before[n])))
                    result["tensors"] = len(after)
            state = acspeed._patch.state_of(ddp)
            result.update(params=flat_params(ddp), state_finite=_state_finite(ddp), fallbacks=state.nonfinite_fallbacks,
                          compressed_buckets=state.powersgd.compressed_buckets)
            runs[label] = result
            del ddp
        injected = runs["injected"]
        out[name] = {key: value for key, value in injected.items() if key != "params"}
        out[name]["params_finite"] = bool(torch.isfinite(injected["params"]).all())
        if exact:
            out[name]["same_as_without_the_batch"] = bool(torch.equal(injected["params"], runs["reference"]["params"]))
            out[name]["reference_fallbacks"] = runs["reference"]["fallbacks"]
    acspeed.configure()
    out["_log"] = [line for level, line in captured.take() if level == "WARNING"]
    return out
