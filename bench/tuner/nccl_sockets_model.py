"""What the step model forecasts for NCCL's sockets (issue 38 item 3) on a link capped per flow, such
as the testbed's 2x1@2gbit/500mbit: computed, not measured (no GPU here; NCCL's sockets need NCCL
between two nodes over TCP).

Each config's flows come from the model's own rule (`_core.flows`, tuner/include/acspeed/tuner/flows.h:
NCCL on CUDA, each stream's communicator opens threads x sockets TCP connections). On a per-flow capped
link the model's fit for N flows is the rate N flows carry: min(N x flow rate, link rate) (the link
the step model fits per flow count, step_model.h). The table gives the wire time of one step's
gradients at that rate; a socket value whose flow count no trial fitted gets no forecast: the tuner
measures it first (flow_count_unmeasured). Usage: PYTHONPATH=python python3 bench/tuner/nccl_sockets_model.py
[--link-gbit 2] [--flow-mbit 500] [--payload-mb 46.8] (resnet18's fp32 gradients)."""
import argparse
import json

from acspeed import _runtime

VALUES = [None, (1, 1), (1, 2), (2, 2), (4, 1), (2, 4), (4, 4), (2, 8)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--link-gbit", type=float, default=2.0)
    parser.add_argument("--flow-mbit", type=float, default=500.0)
    parser.add_argument("--payload-mb", type=float, default=46.8)
    args = parser.parse_args()
    core = _runtime.core()
    link, flow = args.link_gbit * 1e9 / 8, args.flow_mbit * 1e6 / 8
    # Two nodes, one rank each: the ring all-reduce sends 2 (n - 1) / n = 1 payload per node.
    sent = args.payload_mb * 1e6
    print("| NCCL sockets | streams | flows | rate the model fits (MB/s) | gradients' wire time (ms) |")
    print("|---|---|---|---|---|")
    for streams in (1, 2):
        for value in VALUES:
            config = {"version": 2, "streams": streams}
            if value is not None:
                config["nccl_sockets"] = {"threads": value[0], "per_thread": value[1]}
            parsed, _ = core.CommConfig.from_json(json.dumps(config))
            n = core.flows(parsed, 2, 2, "nccl", "cuda")
            rate = min(n * flow, link)
            name = "NCCL's choice" if value is None else f"{value[0]}x{value[1]}"
            print(f"| {name} | {streams} | {n} | {rate / 1e6:.1f} | {sent / rate * 1e3:.0f} |")


if __name__ == "__main__":
    main()
