"""Link throughput between testbed nodes (no iperf here): every node but node 0 sends to node 0
over --streams TCP connections for --seconds; node 0 receives and prints one JSON line with the
goodput of each connection and of all together. Goodput counts TCP payload: at most 1448 of every
1514 bytes on the wire (95.6%), so a link capped at RATE shows at most 0.956 x RATE here.

    acspeed-testbed run 2x1@1gbit -- python3 bench/testbed/link_throughput.py --seconds 3
    acspeed-testbed run 2x1@1gbit/200mbit -- python3 bench/testbed/link_throughput.py --streams 3
    acspeed-testbed run 3x1@500mbit -- python3 bench/testbed/link_throughput.py   # node 0's downlink
"""
import argparse
import json
import os
import socket
import sys
import threading
import time

CHUNK = 1 << 20


def receive(port, streams, result):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((os.environ["NODE_ADDR"], port))
    server.listen(streams)
    flows = [None] * streams

    def drain(index, conn):
        buf = bytearray(CHUNK)
        total, first, last = 0, None, None
        while True:
            got = conn.recv_into(buf)
            if not got:
                break
            now = time.perf_counter()
            first = first if first is not None else now
            last = now
            total += got
        flows[index] = (total, first, last)

    threads = []
    for index in range(streams):
        conn, _ = server.accept()
        thread = threading.Thread(target=drain, args=(index, conn))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    start = min(f[1] for f in flows)
    end = max(f[2] for f in flows)
    result.update({
        "connections": streams,
        "seconds": end - start,
        "total_mbit_s": sum(f[0] for f in flows) * 8 / (end - start) / 1e6,
        "flow_mbit_s": [f[0] * 8 / (f[2] - f[1]) / 1e6 for f in flows],
    })


def send(address, port, streams, seconds):
    deadline = time.monotonic() + 30
    conns = []
    while len(conns) < streams:
        try:
            conns.append(socket.create_connection((address, port), timeout=5))
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    data = b"\0" * CHUNK
    stop = time.perf_counter() + seconds

    def pump(conn):
        while time.perf_counter() < stop:
            conn.sendall(data)
        conn.close()

    threads = [threading.Thread(target=pump, args=(c,)) for c in conns]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--port", type=int, default=5201)
    args = parser.parse_args()
    rank, nodes = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
    if rank == 0:
        result = {"profile": os.environ["ACSPEED_INSTANCE_TYPE"].removeprefix("testbed-"), "senders": nodes - 1}
        receive(args.port, args.streams * (nodes - 1), result)
        print(json.dumps(result), flush=True)
    else:
        send(os.environ["MASTER_ADDR"], args.port, args.streams, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
