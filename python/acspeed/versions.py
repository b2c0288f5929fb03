"""The library versions a job runs with, as torch sees them. A decision records them (the trial
worker reports them to the tuner) and `import acspeed` compares the job's with the decision's;
`acspeed-tune explain` asks this same function (`python -m acspeed.versions` prints them as JSON),
so explain and `import acspeed` always compare like with like.

NCCL and CUDA are torch's own (torch bundles its NCCL, which need not be the system library the C++
tools load), and only when torch can use CUDA here: a CPU job has none ("" = no check). What torch
bundles is reported beside them whether it is used or not (`torch_nccl`, `torch_cuda`), so every
command can say "NCCL: not used (CPU job; torch bundles 2.30.7)" (runtime/include/acspeed/job_versions.h)."""
import json
from typing import Dict


def _dotted(version) -> str:
    return ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)


def job_versions() -> Dict[str, str]:
    """{"torch": "2.15.0", "nccl": "2.21.5" or "", "cuda": "12.4" or "", "torch_nccl": "2.21.5" or "",
    "torch_cuda": "12.4" or ""}: the job's (used) and torch's own (bundled, used or not)."""
    import torch  # noqa: PLC0415 - `python -m acspeed.versions` imports nothing else

    versions = {"torch": torch.__version__.split("+")[0], "nccl": "", "cuda": "",
                "torch_cuda": torch.version.cuda or "", "torch_nccl": ""}
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
