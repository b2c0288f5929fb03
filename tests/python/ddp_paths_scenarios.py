"""Worker-side scenarios for DDP's own code paths with acspeed applied (test_ddp_paths.py): copies
(pickle, deepcopy, torch.save), backward(create_graph=True), GradScaler's skipped steps side by side
with torch's stock hooks, process groups as users have them, compiled paths. Each returns plain data;
each compares with a reference run (plain DDP, or torch's stock hook for the same math)."""
import copy
import io
import json
import os
import pickle
import threading

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.join import Join
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as torch_powersgd

import acspeed
import acspeed.apply
import acspeed._patch
from ddp_scenarios import (STOCK_HOOKS, Captured, CountingObserver, batches, config, environment, flat_params,
                           make_model, plain_ddp, scaled_steps, stock_hook_ddp, train)
from torch.nn.parallel import DistributedDataParallel as DDP_CLASS


def config_v2(**fields) -> str:
    return json.dumps({"version": 2, **fields})


# Every kind of config: bucket settings only (no hook), hooked non-compressing (an algorithm on two
# lanes), compressing (fp16, PowerSGD), and acspeed's hook replaced by a user's hook.
KINDS = {
    "bucket_only": config(bucket_cap_mb=0.001),
    "hooked": config(algorithm="reduce_scatter", streams=2, bucket_cap_mb=0.001),
    "fp16": config(compression="fp16", bucket_cap_mb=0.001),
    "powersgd": config_v2(compression="powersgd", powersgd_rank=2, powersgd_start_step=1, bucket_cap_mb=0.001),
    "user_hook": config(algorithm="reduce_scatter", streams=2, bucket_cap_mb=0.001),
}


def _wrapped(kind: str, module: torch.nn.Module, **kwargs):
    ddp = acspeed.apply.wrap(module, KINDS[kind], **kwargs)
    if kind == "user_hook":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    return ddp


# --- copies --------------------------------------------------------------------------------------

_LOCKS = (type(threading.Lock()), type(threading.RLock()))


def _foreign(ddp) -> list:
    """What a copied DDP model holds that is acspeed's, or a process group other than DDP's own, or
    a lock, stream or thread: the type names, found in its attributes (not its module)."""
    found, seen = [], set()

    def visit(value, depth):
        if id(value) in seen or depth > 4:
            return
        seen.add(id(value))
        kind = type(value)
        if kind.__module__.startswith("acspeed") or isinstance(value, _LOCKS + (threading.Thread, torch.Stream)) \
                or (isinstance(value, dist.ProcessGroup) and value is not ddp.process_group):
            found.append(f"{kind.__module__}.{kind.__qualname__}")
            return
        if isinstance(value, dict):
            items = value.values()
        elif isinstance(value, (list, tuple, set)):
            items = value
        elif hasattr(value, "__self__"):
            items = [value.__self__]  # a bound method keeps its object
        else:
            items = []
        for item in items:
            visit(item, depth + 1)

    for name, value in vars(ddp).items():
        if name not in ("_modules", "_parameters", "_buffers", "process_group"):
            visit(value, 0)
    return found


def _copies(ddp) -> dict:
    """pickle, deepcopy and torch.save/load of a DDP model, made on this rank alone."""
    saved = io.BytesIO()
    torch.save(ddp, saved)
    saved.seek(0)
    return {"pickle": pickle.loads(pickle.dumps(ddp)), "deepcopy": copy.deepcopy(ddp),
            "torch_save": torch.load(saved, weights_only=False)}


def copies(rank: int, world_size: int) -> dict:
    """Per config kind: rank 0 alone copies the model after two steps (an EMA or evaluation copy;
    rank 1 goes on, so a collective in copying would hang or desynchronise the ranks); both ranks
    train the original two more steps (against a run that never copied); then every rank copies it
    and trains the copy, against plain DDP from the same parameters (DDP's rule: a copy has a new
    reducer on the default group and no comm hook)."""
    out = {}
    for kind in KINDS:
        ddp = _wrapped(kind, make_model())
        first = train(ddp, rank, steps=2)
        result = {}
        if rank == 0:
            for how, twin in _copies(ddp).items():
                result[how] = {"foreign": _foreign(twin), "hook": acspeed._patch.state_of(twin) is not None,
                               "same_params": torch.equal(flat_params(twin), first),
                               "comm_hooks": [getattr(h, "__qualname__", repr(h)) for h, _ in twin._comm_hooks]}
        state = acspeed._patch.state_of(ddp)
        result["powersgd_tensors"] = len(acspeed.state_dict(ddp)["tensors"])
        twice = _wrapped(kind, make_model())
        train(twice, rank, steps=2)
        result["original_unchanged"] = torch.equal(train(ddp, rank, steps=2), train(twice, rank, steps=2))
        result["hook_kept"] = acspeed._patch.state_of(ddp) is state
        twin = copy.deepcopy(ddp)  # on every rank: the copy trains
        start = copy.deepcopy(ddp.module)
        result["copy_trains_as_plain_ddp"] = torch.equal(train(twin, rank, steps=2),
                                                         train(plain_ddp(start), rank, steps=2))
        result["copy_state_dict"] = acspeed.state_dict(twin)
        out[kind] = result
        del ddp, twin, twice
    return out


# --- backward(create_graph=True) -----------------------------------------------------------------

class Elementwise(torch.nn.Module):
    """Two gradient matrices and a vector, each larger than the 0.0001 MiB buckets below, so every
    bucket holds one parameter: torch 2.15's DDP itself fails backward(create_graph=True) when a
    bucket holds several ("a leaf Variable that requires grad is being used in an in-place
    operation", with or without acspeed), and on nn.Linear."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w1 = torch.nn.Parameter(torch.randn(32, 24) * 0.3)
        self.v = torch.nn.Parameter(torch.randn(32) * 0.5 + 1)
        self.w2 = torch.nn.Parameter(torch.randn(5, 32) * 0.3)

    def forward(self, x):
        h = torch.tanh(x.unsqueeze(1) * self.w1).sum(-1) * self.v
        return torch.tanh(h.unsqueeze(1) * self.w2).sum(-1)


ONE_PER_BUCKET = {"bucket_cap_mb": 0.0001, "first_bucket_mb": 0.0001}
GRAPH_KINDS = {
    "hooked": config(algorithm="reduce_scatter", streams=2, **ONE_PER_BUCKET),
    "fp16": config(compression="fp16", **ONE_PER_BUCKET),
    "powersgd": config_v2(compression="powersgd", powersgd_rank=2, powersgd_start_step=0, **ONE_PER_BUCKET),
    "user_hook": config(algorithm="hierarchical", streams=3, **ONE_PER_BUCKET),
}
PENALTY = 0.1


def _graph_reference(compression: str):
    """DDP as torch has it for the same math: plain DDP, or torch's stock compress hook."""
    ddp = plain_ddp(Elementwise(), bucket_cap_mb_list=[0.0001, 0.0001])
    if compression in STOCK_HOOKS:
        ddp.register_comm_hook(None, STOCK_HOOKS[compression])
    return ddp


def _graph_wrapped(kind: str):
    ddp = acspeed.apply.wrap(Elementwise(), GRAPH_KINDS[kind])
    if kind == "user_hook":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    return ddp


def _first_and_second(ddp, x, y, create_graph: bool, second_order: bool = False):
    """One step's reduced gradients and, with second_order, the gradient of the penalty
    PENALTY * sum(grad^2) through them."""
    params = list(ddp.parameters())
    for p in params:
        p.grad = None
    torch.nn.functional.mse_loss(ddp(x), y).backward(create_graph=create_graph)
    first = [p.grad for p in params]
    second = None
    if second_order:
        penalty = PENALTY * sum((g ** 2).sum() for g in first)
        second = torch.autograd.grad(penalty, params)
    for p in params:
        p.grad = None  # breaks the parameter <-> gradient cycle create_graph makes
    return [g.detach() for g in first], second


def _expected_second(module: torch.nn.Module, x, y, first, world_size: int):
    """The penalty's gradient when each reduced gradient carries the graph DDP's own allreduce leaves
    on it (the local gradient / W; higher-order gradients are not synchronised across ranks)."""
    params = list(module.parameters())
    local = torch.autograd.grad(torch.nn.functional.mse_loss(module(x), y), params, create_graph=True)
    return torch.autograd.grad(sum((2 * PENALTY * g * l).sum() for g, l in zip(first, local)) / world_size, params)


def _create_graph_training(ddp, rank: int, create_graph: bool = True, steps: int = 3) -> torch.Tensor:
    """SGD on the reduced gradients of backward(create_graph=...) (torch's own test_ddp_create_graph
    runs several such steps; a second-order pass through them works at the first step only, in plain
    DDP too: the bucket buffer's history chains the steps' graphs)."""
    params = list(ddp.parameters())
    optimizer = torch.optim.SGD(params, lr=0.05)
    for x, y in batches(rank, steps):
        first, _ = _first_and_second(ddp, x, y, create_graph=create_graph)
        for p, g in zip(params, first):
            p.grad = g
        optimizer.step()
    return flat_params(ddp)


def _input_penalty_training(ddp, rank: int, steps: int = 3) -> torch.Tensor:
    """A gradient penalty on the inputs (WGAN-GP): its second-order gradients reach the parameters
    through one ordinary backward, which DDP reduces."""
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for x, y in batches(rank, steps):
        optimizer.zero_grad()
        x = x.clone().requires_grad_()
        output = ddp(x)
        slope, = torch.autograd.grad(output.sum(), x, create_graph=True)
        (torch.nn.functional.mse_loss(output, y) + PENALTY * (slope.norm(dim=1) - 1).square().mean()).backward()
        optimizer.step()
    return flat_params(ddp)


def _cat(tensors) -> torch.Tensor:
    return torch.cat([t.flatten() for t in tensors])


def _rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got - want).abs().max() / want.abs().max()).item()


def create_graph(rank: int, world_size: int) -> dict:
    """Per config kind, against torch's path for the same math (plain DDP, or the stock compress
    hook; torch's powerSGD_hook itself raises under create_graph, so PowerSGD is held to its own
    run without create_graph and to plain DDP's second-order formula): the first step's reduced
    gradients and the penalty's second-order gradient through them; three steps trained on
    backward(create_graph=True) gradients; three steps with an input-gradient penalty."""
    x, y = batches(rank, 1)[0]
    out = {}
    references = {}
    for kind in GRAPH_KINDS:
        compression = json.loads(GRAPH_KINDS[kind]).get("compression", "none")
        first, second = _first_and_second(_graph_wrapped(kind), x, y, create_graph=True, second_order=True)
        without, _ = _first_and_second(_graph_wrapped(kind), x, y, create_graph=False)
        expected = _expected_second(Elementwise(), x, y, first, world_size)
        result = {"same_as_without_create_graph": torch.equal(_cat(first), _cat(without)),
                  "second_rel_err": _rel(_cat(second), _cat(expected)),
                  "trained_same_as_without": torch.equal(_create_graph_training(_graph_wrapped(kind), rank),
                                                         _create_graph_training(_graph_wrapped(kind), rank, False))}
        reference_kind = compression if compression != "powersgd" else "none"
        if reference_kind not in references:
            ref_first, ref_second = _first_and_second(_graph_reference(reference_kind), x, y, create_graph=True,
                                                      second_order=True)
            references[reference_kind] = {
                "first": _cat(ref_first), "second": _cat(ref_second),
                "trained": _create_graph_training(_graph_reference(reference_kind), rank),
                "penalty": _input_penalty_training(_graph_reference(reference_kind), rank)}
        reference = references[reference_kind]
        trained = _create_graph_training(_graph_wrapped(kind), rank)
        penalty = _input_penalty_training(_graph_wrapped(kind), rank)
        if compression != "powersgd":
            result.update(same_as_torch=torch.equal(_cat(first), reference["first"]),
                          second_rel_to_torch=_rel(_cat(second), reference["second"]),
                          trained_equal_torch=torch.equal(trained, reference["trained"]),
                          penalty_equal_torch=torch.equal(penalty, reference["penalty"]))
        else:  # low-rank gradients: close to plain DDP's, not equal
            result.update(trained_rel_to_plain=_rel(trained, reference["trained"]),
                          penalty_rel_to_plain=_rel(penalty, reference["penalty"]),
                          penalty_finite=bool(torch.isfinite(penalty).all()))
        out[kind] = result
    # torch's own PowerSGD hook under create_graph, for the record (why acspeed's is held to itself).
    stock = plain_ddp(Elementwise(), bucket_cap_mb_list=[0.0001, 0.0001])
    stock.register_comm_hook(torch_powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                                          start_powerSGD_iter=2), torch_powersgd.powerSGD_hook)
    try:
        _create_graph_training(stock, rank)
        out["torch_powersgd"] = "no error"
    except RuntimeError as error:
        out["torch_powersgd"] = str(error).splitlines()[0]
    return out


# --- GradScaler skipping steps, side by side with torch's hooks -----------------------------------

def _scaled_training(ddp, model, rank: int, bad_steps=(3,), steps: int = 7) -> dict:
    """SGD under a CPU GradScaler; rank 1's first weight gradient holds an Inf at `bad_steps`."""
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    grad_scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    scales, finite = scaled_steps(ddp, model, optimizer, grad_scaler, rank, steps,
                                  {step: float("inf") for step in bad_steps})
    return {"scales": scales, "finite": finite, "params": flat_params(ddp)}


def skipped_steps(rank: int, world_size: int) -> dict:
    """fp16 (buckets of one tensor) and PowerSGD (one bucket: torch's powerSGD_hook aborts gloo with
    more in flight) under a GradScaler that skips a step, against torch's fp16_compress_hook and
    powerSGD_hook (rank 2, start step 2, error feedback, warm start) and plain DDP."""
    out = {}
    model = make_model()
    plain = _scaled_training(plain_ddp(model), model, rank)
    for name, text, stock in (
            ("fp16", config(compression="fp16", bucket_cap_mb=0.001),
             lambda m: stock_hook_ddp(m, default_hooks.fp16_compress_hook, bucket_cap_mb=0.001)),
            ("powersgd", config_v2(compression="powersgd", powersgd_rank=2, powersgd_start_step=2),
             None)):
        model = make_model()
        ddp = acspeed.apply.wrap(model, text)
        mine = _scaled_training(ddp, model, rank)
        model = make_model()
        if stock is None:
            torch_state = torch_powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                                       start_powerSGD_iter=2)
            reference = plain_ddp(model)
            reference.register_comm_hook(torch_state, torch_powersgd.powerSGD_hook)
        else:
            torch_state = None
            reference = stock(model)
        theirs = _scaled_training(reference, model, rank)
        result = {"scales": mine["scales"], "torch_scales": theirs["scales"], "plain_scales": plain["scales"],
                  "finite": mine["finite"], "torch_finite": theirs["finite"],
                  "params_equal_torch": torch.equal(mine["params"], theirs["params"]),
                  "params_finite": bool(torch.isfinite(mine["params"]).all()),
                  "rel_to_plain": ((mine["params"] - plain["params"]).abs().max()
                                   / plain["params"].abs().max()).item(),
                  "params": mine["params"].tolist()}
        psgd = acspeed._patch.state_of(ddp).powersgd
        if psgd is not None:
            result["residuals_finite"] = all(bool(torch.isfinite(t.error).all()) for t in psgd.tensors.values())
            result["torch_residuals_finite"] = all(bool(torch.isfinite(e).all())
                                                   for e in torch_state.error_dict.values())
            result["torch_params_finite"] = bool(torch.isfinite(theirs["params"]).all())
        out[name] = result
        del ddp, reference
    return out


def copies_and_autograd(rank: int, world_size: int) -> dict:
    """One launch: copies, create_graph, skipped steps (strict: a bucket out of order is an error)."""
    captured = Captured()
    with environment(ACSPEED_STRICT="1"):
        out = {"copies": copies(rank, world_size), "create_graph": create_graph(rank, world_size)}
    out["skipped_steps"] = skipped_steps(rank, world_size)
    acspeed.configure()
    out["_log"] = captured.take()
    return out



# --- process groups and backends as users have them; compiled paths --------------------------------

class _WorkWithoutFuture:
    """A backend's Work that has no future, as some backends' ("Work::getFuture not implemented")."""

    def __init__(self, work):
        self._work = work

    def wait(self, *args):
        return self._work.wait(*args)

    def is_completed(self):
        return self._work.is_completed()

    def get_future(self):
        raise RuntimeError("Work::getFuture not implemented.")


class _NoFutures:
    """The asynchronous collectives of torch.distributed's Python API return Work without a future
    (DDP's own reducer, in C++, is untouched, as on such a backend whose all-reduce DDP can use)."""
    NAMES = ("all_reduce", "all_gather_into_tensor", "all_gather", "broadcast", "reduce", "reduce_scatter_tensor")

    def __enter__(self):
        self.saved = {name: getattr(dist, name) for name in self.NAMES}
        for name, function in self.saved.items():
            setattr(dist, name, self._without_future(function))
        return self

    @staticmethod
    def _without_future(function):
        def call(*args, **kwargs):
            work = function(*args, **kwargs)
            return _WorkWithoutFuture(work) if kwargs.get("async_op") else work
        return call

    def __exit__(self, *exc):
        for name, function in self.saved.items():
            setattr(dist, name, function)


HOOKED = config(algorithm="reduce_scatter", streams=2, bucket_cap_mb=0.001)


def _on_group(rank: int, text: str, **kwargs) -> dict:
    """The config applied through `import acspeed` (ACSPEED_CONFIG) to DDP with these arguments,
    against plain DDP with the same arguments."""
    base = train(plain_ddp(make_model(), **kwargs), rank)
    with environment(ACSPEED_CONFIG=text):
        ddp = DDP_CLASS(make_model(), **kwargs)
    return {"hook": acspeed._patch.state_of(ddp) is not None, "equal": torch.equal(train(ddp, rank), base)}


def backends_and_compile(rank: int, world_size: int, folder: str) -> dict:
    """Backends without futures, backend names, subgroups, a device mesh, DDP(torch.compile(model)),
    and DDP's per-parameter (python reducer) hook path on a model acspeed hooked."""
    from torch.distributed.device_mesh import init_device_mesh  # noqa: PLC0415
    captured = Captured()
    hooked_file = os.path.join(folder, "hooked.json")
    with open(hooked_file, "w") as out_file:
        out_file.write(HOOKED)
    out = {}
    base = train(plain_ddp(make_model()), rank)
    captured.take()

    with _NoFutures():
        for name, text in (("hooked", HOOKED), ("fp16", config(compression="fp16", bucket_cap_mb=0.001)),
                           ("hierarchical", config(algorithm="hierarchical", bucket_cap_mb=0.001))):
            ddp = acspeed.apply.wrap(make_model(), text)
            out[f"no_future/{name}"] = {"hook": acspeed._patch.state_of(ddp) is not None,
                                        "cap": ddp.bucket_bytes_cap,
                                        "equal": torch.equal(train(ddp, rank), base), "log": captured.take()}
            del ddp

    # Backend names as torch spells them for device-qualified and mixed groups.
    for name in ("cpu:gloo", "cpu:gloo,cuda:nccl"):
        try:
            group = dist.new_group([0, 1], backend=name)
        except (RuntimeError, ValueError) as error:
            out[f"backend/{name}"] = {"skipped": str(error).splitlines()[0]}
            continue
        result = _on_group(rank, hooked_file, process_group=group)
        result["backend"] = str(dist.get_backend(group))
        result["log"] = captured.take()
        out[f"backend/{name}"] = result

    # A subgroup of every rank, one rank's own group, a device mesh.
    out["subgroup/all"] = _on_group(rank, hooked_file, process_group=dist.new_group([0, 1]))
    singles = [dist.new_group([0]), dist.new_group([1])]
    out["subgroup/own"] = _on_group(rank, hooked_file, process_group=singles[rank])
    out["subgroup/own"]["log"] = captured.take()
    out["device_mesh"] = _on_group(rank, hooked_file, device_mesh=init_device_mesh("cpu", (world_size,)))
    captured.take()

    # DDP around a compiled module (AOT autograd: the backward is one compiled function), against
    # plain DDP around the same: non-compressing configs give the same parameters.
    for name, text in (("bucket_only", config(bucket_cap_mb=0.001)), ("hooked", HOOKED)):
        reference = train(plain_ddp(torch.compile(make_model(), backend="aot_eager")), rank)
        ddp = acspeed.apply.wrap(torch.compile(make_model(), backend="aot_eager"), text)
        out[f"compiled_module/{name}"] = {"hook": acspeed._patch.state_of(ddp) is not None,
                                          "equal": torch.equal(train(ddp, rank), reference)}
        del ddp
    captured.take()

    # Uneven inputs under DDP's Join: the rank that ran out of data calls the comm hook itself with zero
    # buckets (DDP._match_all_reduce_for_bwd_pass), in the other rank's bucket order.
    def joined(ddp) -> torch.Tensor:
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
        with Join([ddp]):
            for x, y in batches(rank, 3 if rank == 0 else 2):
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(ddp(x), y).backward()
                optimizer.step()
        return flat_params(ddp)
    for name, text in (("hooked", HOOKED), ("fp16", config(compression="fp16", bucket_cap_mb=0.001))):
        reference = joined(plain_ddp(make_model()) if name == "hooked" else
                           stock_hook_ddp(make_model(), STOCK_HOOKS["fp16"], bucket_cap_mb=0.001))
        ddp = acspeed.apply.wrap(make_model(), text)
        out[f"join/{name}"] = {"hook": acspeed._patch.state_of(ddp) is not None,
                               "equal": torch.equal(joined(ddp), reference)}
        del ddp

    # DDP's python reducer calls the hooks in DDP._comm_hooks per parameter with (grad, param). Turned
    # on for a model built without it (what DDP.__init__ does in that mode), acspeed's bucket hook is
    # not among them: DDP's own per-parameter allreduce runs, as on plain DDP.
    def per_parameter(ddp):
        ddp._use_python_reducer = True
        ddp._register_accum_grad_hook()
        return ddp
    reference = train(per_parameter(plain_ddp(make_model())), rank)
    ddp = per_parameter(acspeed.apply.wrap(make_model(), HOOKED))
    state = acspeed._patch.state_of(ddp)
    observer = CountingObserver()
    acspeed._patch.attach_observer(ddp, observer)
    out["python_reducer_later"] = {"equal": torch.equal(train(ddp, rank), reference),
                                   "bucket_hook_calls": len(observer.launched),
                                   "comm_hooks": len(ddp._comm_hooks), "lanes": len(state.lanes)}
    out["_log"] = captured.take()
    return out
