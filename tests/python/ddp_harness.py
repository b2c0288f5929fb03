"""Runs a function in N local processes joined by a gloo process group (gloo's test style), with a
deadline: a hang or a crash in any rank fails the test with every rank's traceback.

The ranks are forked from multiprocessing's fork server, which imported torch once for the whole test
run (each rank importing it again cost ~2.5 s of CPU: a minute of two cores over the suite's ranks).
Nothing else is shared: the fork server imports nothing of acspeed or of the tests, and each rank
gets the environment of the test at the call (as a spawned one would), then imports what it runs."""
import os
import pickle
import queue
import tempfile
import traceback

import torch.multiprocessing as mp


def _entry(target, rank, world_size, store, env, args, results):
    try:
        os.environ.clear()  # the fork server's environment is the one it started with
        os.environ.update(env)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        import torch  # noqa: PLC0415
        import torch.distributed as dist  # noqa: PLC0415
        # One intra-op thread per rank, as torchrun gives its workers (OMP_NUM_THREADS=1): four ranks
        # of two threads each on two cores spent most of their time waiting for each other's threads.
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
        try:
            # Pickled here, not by the queue: torch.multiprocessing's queue would share a tensor's memory
            # through this process, which has exited by the time a busy parent reads the result.
            results.put((rank, True, pickle.dumps(target(rank, world_size, *args))))
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - reported to the parent
        results.put((rank, False, traceback.format_exc()))


def run_ranks(target, world_size: int, *args, env=None, timeout: float = 240.0, dying=()) -> list:
    """target(rank, world_size, *args) in each rank; returns the ranks' results in rank order. The
    ranks in `dying` are meant to die on their own: their entry is their exit code, and a result
    from one of them fails the test."""
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(["torch", "torch.distributed"])  # before the first call starts it
    results = context.Queue()
    base_env = dict(os.environ, ACSPEED_DB=os.path.join(tempfile.mkdtemp(prefix="acspeed-test-"), "none.db"))
    base_env.update(env or {})
    with tempfile.TemporaryDirectory(prefix="acspeed-store-") as folder:
        store = os.path.join(folder, "store")
        procs = [context.Process(target=_entry, args=(target, rank, world_size, store, base_env, args, results),
                                 daemon=True) for rank in range(world_size)]
        for proc in procs:
            proc.start()
        outcome = {}
        try:
            while len(outcome) < world_size - len(dying):
                try:
                    rank, ok, value = results.get(timeout=timeout)
                except queue.Empty:
                    raise AssertionError(f"ranks {sorted(set(range(world_size)) - set(outcome))} did not finish "
                                         f"within {timeout}s; finished: {outcome}") from None
                outcome[rank] = (ok, pickle.loads(value) if ok else value)
                if not ok:
                    break
        finally:
            for proc in procs:
                proc.join(timeout=5 if len(outcome) == world_size - len(dying) else 0.1)
                if proc.is_alive():
                    proc.kill()
        failed = {rank: value for rank, (ok, value) in outcome.items() if not ok}
        if failed:
            raise AssertionError("\n".join(f"rank {rank} failed:\n{tb}" for rank, tb in failed.items()))
        survived = sorted(set(dying) & set(outcome))
        if survived:
            raise AssertionError(f"ranks {survived} were meant to die and returned {outcome}")
        return [procs[rank].exitcode if rank in dying else outcome[rank][1] for rank in range(world_size)]
