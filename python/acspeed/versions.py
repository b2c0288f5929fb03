"""The library versions a job runs with, as torch sees them. A decision records them (the trial
worker reports them to the tuner) and `import acspeed` compares the job's with the decision's;
`acspeed-tune explain` asks this same function (`python -m acspeed.versions` prints them as JSON),
so explain and `import acspeed` always compare like with like.

NCCL and CUDA are torch's own (torch bundles its NCCL, which need not be the system library the C++
tools load), and only when torch can use CUDA here: a CPU job has none ("" = no check). What torch
bundles is reported beside them whether it is used or not (`torch_nccl`, `torch_cuda`), so every
command can say "NCCL: not used (CPU job; torch bundles 2.30.7)" (runtime/include/acspeed/job_versions.h).

Inside a job whose default process group exists, `process_group` names the implementation that runs
it (`dist.get_backend_impl().name()`, torch >= 2.14: "gloo", "nccl2", or "nccl" for the classic NCCL
group, which torch 2.15 also builds for backend="nccl-legacy"; older torch: the backend's name, since
it has one implementation per name). The same backend name runs different code across torch
versions, so a session records which one its trials ran on (docs/nccl2.md)."""
import json
from typing import Dict


def _dotted(version) -> str:
    return ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)


def process_group_impl() -> str:
    """The implementation running the default process group ("gloo", "nccl2", "nccl"); "" when
    there is none."""
    import torch.distributed as dist  # noqa: PLC0415

    if not (dist.is_available() and dist.is_initialized()):
        return ""
    impl = getattr(dist, "get_backend_impl", None)
    if impl is None:  # torch < 2.14: one implementation per backend name
        return str(dist.get_backend())
    return impl().name()


def job_versions() -> Dict[str, str]:
    """{"torch": "2.15.0", "nccl": "2.21.5" or "", "cuda": "12.4" or "", "torch_nccl": "2.21.5" or "",
    "torch_cuda": "12.4" or "", "process_group": "gloo" or ""}: the job's (used) and torch's own
    (bundled, used or not), and the default process group's implementation."""
    import torch  # noqa: PLC0415 - `python -m acspeed.versions` imports nothing else

    versions = {"torch": torch.__version__.split("+")[0], "nccl": "", "cuda": "",
                "torch_cuda": torch.version.cuda or "", "torch_nccl": "", "process_group": process_group_impl()}
    try:
        versions["torch_nccl"] = _dotted(torch.cuda.nccl.version())
    except (RuntimeError, AttributeError):  # a torch built without NCCL
        pass
    if torch.cuda.is_available():
        versions["cuda"], versions["nccl"] = versions["torch_cuda"], versions["torch_nccl"]
    return versions


def main() -> None:
    print(json.dumps(job_versions()))


if __name__ == "__main__":
    main()
