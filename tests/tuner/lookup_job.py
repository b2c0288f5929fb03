"""A training job for test_store_concurrency.py: one process (gloo, world size 1) that imports acspeed
and builds DDP models over and over until the file named by argv[1] exists. It prints one JSON line
first (its model's signature and torch version: what a tune must key its decisions by to reach it),
then one per DDP model: the decision acspeed applied (None while the store holds none for it), the
bucket size DDP got, and the lines acspeed logged."""
import json
import logging
import os
import re
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import acspeed  # noqa: F401 - the one line a training script adds
import acspeed.decision
from torch.nn.parallel import DistributedDataParallel as DDP


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []
        logging.getLogger("acspeed").addHandler(self)

    def emit(self, record):
        self.lines.append([record.levelname, record.getMessage()])


def main(stop: str) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory(prefix="acspeed-job-") as folder:
        dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
        print(json.dumps({"model_signature": acspeed.decision.model_signature(model),
                          "torch_version": torch.__version__}), flush=True)
        logged = Lines()
        while not os.path.exists(stop):
            ddp = DDP(model)
            lines, logged.lines = logged.lines, []
            found = re.match(r"applied decision #(\d+) ", lines[0][1]) if lines else None
            print(json.dumps({"decision": int(found[1]) if found else None, "bucket_bytes": ddp.bucket_bytes_cap,
                              "log": lines}), flush=True)
            del ddp
            time.sleep(0.02)
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
