"""Rebuilding a live DDP model's reducer with other buckets (online tuning's bucket size, and its
end state: docs/online.md, "The end state").

DDP's reducer cannot change its bucket caps (`bucket_bytes_cap_` is const in the C++ Reducer) nor
take a second comm hook (`register_comm_hook` refuses a second call), so a new bucket size means a
new reducer. The route is the one `DistributedDataParallel.__setstate__` takes to build the reducer
of an unpickled model (torch 2.15, torch/nn/parallel/distributed.py, `__setstate__` lines 1509-1543):
`_build_params_for_reducer`, `_build_debug_param_to_name_mapping`, `_ddp_init_helper` (lines
1387-1497: bucket assignment from `self._bucket_config`, a new `dist.Reducer` and `dist.Logger`),
then manual backward finalization and static graph on the new reducer. The bucket caps come from
`_BucketCapacityConfig.create` (lines 64-116), the factory `__init__` uses (lines 1036-1047), so the
rebuilt reducer has exactly the buckets a DDP constructed with those arguments has. The old reducer
goes with its last reference (`ddp.reducer` and its logger): its destructor removes its autograd
hooks. A new reducer has no comm hook: the caller registers one if the config needs it.

With `gradient_as_bucket_view=True` the new reducer copies gradients accumulated so far (a
`no_sync` micro-batch) into its own bucket views and points `.grad` at them (the C++ Reducer's
`initialize_bucket_views`), as DDP's own bucket rebuild after the first step does. As any new
reducer, it reduces its first synchronised step in one bucket in parameter order and rebuilds its
buckets from the order gradients arrived in at the next forward (a broadcast from rank 0 that every
rank makes in that forward, or in its join hook).

The private API is checked, not assumed: where any piece is missing (an older torch), `unavailable`
says why and online tuning holds the bucket size.
"""
from typing import Optional

import torch

_ROUTE = ("_build_params_for_reducer", "_build_debug_param_to_name_mapping", "_ddp_init_helper")


def unavailable(arguments: dict) -> Optional[str]:
    """Why a DDP model built with these (bound) constructor arguments cannot have its reducer
    rebuilt here, or None."""
    from torch.nn.parallel import distributed  # noqa: PLC0415 - loaded with torch

    missing = [name for name in _ROUTE if not hasattr(distributed.DistributedDataParallel, name)]
    if not hasattr(distributed, "_BucketCapacityConfig"):
        missing.append("_BucketCapacityConfig")
    if missing:
        return (f"torch {torch.__version__} lacks DDP's private {', '.join(missing)}, which rebuilding the "
                "reducer needs (torch 2.15 has them)")
    if arguments.get("bucket_cap_mb_list") is not None:
        return "you passed bucket_cap_mb_list"
    return None


def smallest_cap(ddp, bucket_cap_mb: Optional[float], bucket_cap_mb_list: Optional[list]) -> int:
    """The smallest bucket limit, in bytes, of a reducer that rebuild() would build with these
    arguments (the first bucket's included: read as rebuild reads it)."""
    from torch.nn.parallel import distributed  # noqa: PLC0415

    config = distributed._BucketCapacityConfig.create(bucket_cap_mb=bucket_cap_mb,
                                                      bucket_cap_mb_list=bucket_cap_mb_list,
                                                      use_python_reducer=ddp._use_python_reducer)
    return min([config.first_bucket_bytes_cap, config.bucket_bytes_cap, *config.per_bucket_bytes_caps])


def rebuild(ddp, bucket_cap_mb: Optional[float], bucket_cap_mb_list: Optional[list]) -> None:
    """Gives `ddp` a new reducer whose buckets are those DDP(..., bucket_cap_mb=..., bucket_cap_mb_list=...)
    builds (None: DDP's default). Local to this rank; call it on every rank between the same two
    synchronised steps, after one backward ended and before the next forward. The first-bucket
    size DDP reads from torch.distributed._DEFAULT_FIRST_BUCKET_BYTES is read here too (set it around
    the call, as acspeed.apply does around construction)."""
    from torch.nn.parallel import distributed  # noqa: PLC0415

    config = distributed._BucketCapacityConfig.create(bucket_cap_mb=bucket_cap_mb,
                                                      bucket_cap_mb_list=bucket_cap_mb_list,
                                                      use_python_reducer=ddp._use_python_reducer)
    # What __init__ sets from the factory (distributed.py lines 1036-1047).
    ddp._bucket_config = config
    ddp.bucket_bytes_cap = config.bucket_bytes_cap
    ddp.bucket_bytes_cap_list = list(config.per_bucket_bytes_caps)
    ddp.bucket_bytes_cap_default = config.first_bucket_bytes_cap < config.bucket_bytes_cap
    # __setstate__'s route (lines 1526-1543).
    parameters, expect_sparse_gradient = ddp._build_params_for_reducer()
    param_to_name_mapping = ddp._build_debug_param_to_name_mapping(parameters)
    ddp._ddp_init_helper(parameters, expect_sparse_gradient, param_to_name_mapping, ddp.static_graph)
    if getattr(ddp, "_require_manual_backward_finalization", False):
        ddp.require_manual_backward_finalization = True
    if ddp.static_graph:
        # A new static-graph reducer finds the unused parameters in its first step again, which needs
        # DDP's delayed all-reduce queued once more (_DDPSink, _set_static_graph: lines 398-407, 2626).
        ddp._static_graph_delay_allreduce_enqueued = False
        ddp.reducer._set_static_graph()
        ddp.logger._set_static_graph()

