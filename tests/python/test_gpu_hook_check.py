"""The CPU-checkable parts of tests/gpu/check_hook.sh: its trace reading and verdicts on synthetic
torch.profiler traces (acspeed's engine: NCCL on lane streams overlapping compute; the engine before
it: NCCL on the compute stream), its worker on gloo, and its skip without a GPU. About 15 s."""
import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

from acspeed import _probes

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "gpu"))
import hook_ddp  # noqa: E402

ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel"


def chrome_trace(kernels, backward_ranges=(), runtime=()):
    """A Chrome trace as torch.profiler exports it: kernels (name, stream, ts_us, dur_us) on the GPU,
    the backward record_function ranges and CUDA runtime calls (name, ts_us) on the CPU."""
    events = [{"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": s, "ts": ts, "dur": dur,
               "args": {"stream": s, "device": 0}} for n, s, ts, dur in kernels]
    events += [{"ph": "X", "cat": "user_annotation", "name": hook_ddp.BACKWARD, "pid": 7, "tid": 1, "ts": ts,
                "dur": dur} for ts, dur in backward_ranges]
    events += [{"ph": "X", "cat": "cuda_runtime", "name": n, "pid": 7, "tid": 1, "ts": ts, "dur": 1.0}
               for n, ts in runtime]
    events.append({"ph": "i", "cat": "kernel", "name": "not a span", "pid": 0, "ts": 1})
    return {"traceEvents": events}


def verdict(trace, lanes, compression="none", identical=True):
    result = dict(_probes.kernel_overlap(hook_ddp.kernels_from_trace(trace)), lanes=lanes, identical=identical,
                  max_abs_diff=0.0, host_syncs=hook_ddp.host_syncs_in_backward(trace))
    return result, hook_ddp.problems(result, compression)


def test_kernels_are_read_in_nanoseconds_with_their_stream():
    trace = chrome_trace([(GEMM, 7, 10.5, 2.25), (ALLREDUCE, 20, 11.0, 5.0)])
    assert hook_ddp.kernels_from_trace(trace) == [(GEMM, 7, 10500, 12750), (ALLREDUCE, 20, 11000, 16000)]


def test_two_lanes_overlapping_compute_and_each_other_pass():
    trace = chrome_trace([(GEMM, 7, 0, 100), (GEMM, 7, 100, 100), (ALLREDUCE, 20, 50, 120), (ALLREDUCE, 21, 150, 100)],
                         backward_ranges=[(0, 300)], runtime=[("cudaLaunchKernel", 10), ("cudaStreamWaitEvent", 20)])
    result, found = verdict(trace, lanes=2)
    assert found == [], result
    assert result["comm_streams"] == 2 and result["comm_cross_stream_ns"] == 20_000
    assert result["comm_compute_overlap_ns"] == 150_000


def test_the_old_engine_fails_nccl_on_the_compute_stream_overlaps_nothing():
    # Synchronous collectives on the compute stream, two lanes' kernels one after another on it.
    trace = chrome_trace([(GEMM, 7, 0, 100), (ALLREDUCE, 7, 100, 50), (ALLREDUCE, 7, 150, 50), (GEMM, 7, 200, 100)],
                         backward_ranges=[(0, 300)])
    _, found = verdict(trace, lanes=2)
    assert "no NCCL kernel overlapped a compute kernel" in found
    assert "NCCL kernels ran on 1 stream(s), expected one per lane (2)" in found
    assert "the lanes' NCCL kernels never ran at the same time" in found


def test_host_syncs_inside_backward_fail_unless_the_guard_allows_them():
    trace = chrome_trace([(GEMM, 7, 0, 100), (ALLREDUCE, 20, 50, 100)], backward_ranges=[(0, 200), (400, 200)],
                         runtime=[("cudaStreamSynchronize", 150), ("cudaDeviceSynchronize", 300),
                                  ("cudaStreamSynchronize", 500)])
    result, found = verdict(trace, lanes=1)
    assert result["host_syncs"] == 2  # the one at 300 us is between the two backward passes
    assert found == ["2 host synchronisation(s) inside backward, allowed 0"]
    assert verdict(trace, lanes=1, compression="fp16")[1] == []  # the guard's one read per step
    assert verdict(trace, lanes=1, identical=False)[1][0].startswith("parameters differ")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_worker_on_gloo_matches_the_references(tmp_path):
    port = free_port()
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), ACSPEED_DISABLE="1",
               OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, str(REPO / "tests/gpu/hook_ddp.py"), "--out", str(tmp_path),
                               "--device", "cpu", "--width", "64"], env=dict(env, RANK=str(rank)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in range(2)]
    outputs = [proc.communicate(timeout=240)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    for rank in range(2):
        results = json.loads((tmp_path / f"result-rank{rank}.json").read_text())
        assert [r["config"] for r in results] == [f"{a}/s{s}/{c}" for a, s, c in hook_ddp.CONFIGS]
        assert all(r["identical"] and r["problems"] == [] for r in results), results
        assert [r["lanes"] for r in results] == [s for _, s, _ in hook_ddp.CONFIGS]


def test_the_check_skips_without_a_gpu(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")  # present, lists no GPU
    (bin_dir / "nvidia-smi").chmod(0o755)
    result = subprocess.run(["bash", str(REPO / "tests/gpu/check_hook.sh")], capture_output=True, text=True,
                            env=dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}",
                                     ACSPEED_GPU_LOG_DIR=str(tmp_path / "logs")), timeout=60)
    assert result.returncode == 77 and "skipped: no GPU here" in result.stdout, result
