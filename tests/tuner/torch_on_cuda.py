"""Stands in for an interpreter whose torch runs on CUDA with its own NCCL (FAKE_TORCH_NCCL, e.g.
2.21.5) and CUDA (FAKE_TORCH_CUDA), on a machine without a GPU: runs `-c CODE ARGS...` as python
would, after patching what acspeed.versions reads. Used as ACSPEED_PYTHON (through a shell shim)."""
import os
import sys

import torch

torch.cuda.is_available = lambda: True
torch.cuda.nccl.version = lambda: tuple(int(part) for part in os.environ["FAKE_TORCH_NCCL"].split("."))
torch.version.cuda = os.environ["FAKE_TORCH_CUDA"]

if sys.argv[1:2] != ["-c"]:
    sys.exit(f"torch_on_cuda.py runs only `-c CODE ...`, not {sys.argv[1:]}")
code = sys.argv[2]
sys.argv = ["-c", *sys.argv[3:]]
exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102 - python -c, as asked
