"""Online tuning on the emulated cluster: whole-job time of `import acspeed` tuning inside the job
against plain DDP and against acspeed-tune's decision (issue 36 item 8).

    python3 bench/online/bench_online.py --steps 1000 --pairs 3 --pairs-1gbit 5

Every job is bench/online/job.py (resnet18 32x32, batch 16, fp32, gloo, one process per node pinned to
its own core), run on `acspeed-testbed` clusters. Whole-job time = wall time from DDP's construction
to the last step's end, maximum over ranks (never a step percentile, which hides exploration).
  (a) 2x1@2gbit/500mbit: `acspeed-tune` stores the offline decision first (or --offline-db names a
      store that has it); then, --pairs times in one cluster, in rotated order: the job with an
      empty store (online tuning), with ACSPEED_DISABLE=1 (plain DDP), with the offline store
      (its decision applied), and (c) a second job on the first's store (the online decision
      applied from its first step). Whole-job speedups over plain of online and offline, and
      online's share of offline's, each a geometric mean of the per-pair ratios with its 95%
      interval (bench/stats.py, paired bootstrap).
  (b) 2x1@1gbit (nothing wins there): the job with an empty store alternated with plain DDP,
      --pairs-1gbit pairs: the ratio plain / online.
  (c) the second job's step p50 (steps after --skip) over the offline decision's job's, per pair.
Writes --out (JSON: the figures and every job's per-step times) and prints the figures; a run that
fails keeps the finished jobs' figures and stores in its work folder and names it. Needs root
(network namespaces) and a build folder (ACSPEED_BUILD_DIR, default build/).
"""
import argparse
import json
import os
import pathlib
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # bench/stats.py
import stats  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
JOB = REPO / "bench" / "online" / "job.py"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps of every job (the issue asks >= 1000)")
    parser.add_argument("--pairs", type=int, default=3, help="(a)/(c): rotated (online, plain, offline, second) sets")
    parser.add_argument("--pairs-1gbit", type=int, default=5, help="(b): alternated (online, plain) pairs")
    parser.add_argument("--skip", type=int, default=20, help="(c): steps left out of the step p50 (warm-up)")
    parser.add_argument("--profile-a", default="2x1@2gbit/500mbit")
    parser.add_argument("--profile-b", default="2x1@1gbit")
    parser.add_argument("--offline-db", help="a store holding acspeed-tune's decision for --profile-a (else tuned here)")
    parser.add_argument("--tune-args", default="",
                        help="options for the offline acspeed-tune run ('' = acspeed-tune's defaults)")
    parser.add_argument("--only", choices=("a", "b"), help="run one part only")
    parser.add_argument("--out", default=str(REPO / "bench" / "online" / "results.json"))
    args = parser.parse_args()
    for name in ("steps", "pairs", "pairs_1gbit"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: at least 1")
    if args.skip >= args.steps:
        parser.error(f"--skip {args.skip} leaves no step of --steps {args.steps}")
    return args


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("ACSPEED_BUILD_DIR", REPO / "build")).resolve()


def testbed(profile: str, script: str, timeout: int) -> None:
    """`sh -c script` once in every node of a fresh cluster, each node pinned to its own core."""
    env = dict(os.environ)  # this checkout's acspeed (python/, its _core built there) in every job and worker
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), env.get("PYTHONPATH")]))
    subprocess.run([str(build_dir() / "bin" / "acspeed-testbed"), "run", profile, "--pin", "--", "sh", "-c", script],
                   env=env, check=True, timeout=timeout)


def job_line(steps: int, out: pathlib.Path, env: str) -> str:
    """The job under torchrun on this node; rank 0 (node 0) writes `out`."""
    return (f"{env} {shlex.quote(sys.executable)} -m torch.distributed.run --nnodes \"$NNODES\" "
            f"--node_rank \"$NODE_RANK\" --nproc_per_node 1 --master_addr \"$MASTER_ADDR\" "
            f"--master_port \"$MASTER_PORT\" {shlex.quote(str(JOB))} --steps {steps} --json {shlex.quote(str(out))}")


def offline_store(args, work: pathlib.Path) -> pathlib.Path:
    if args.offline_db:
        return pathlib.Path(args.offline_db).resolve()
    db = work / "offline.db"
    command = [str(build_dir() / "bin" / "acspeed-tune"), "--db", str(db), "--model", "resnet18", "--precision", "fp32",
               "--image-size", "32", "--batch-size", "16", "--nproc-per-node", "1", "--trial-timeout", "600",
               "--budget-minutes", "0", *shlex.split(args.tune_args)]
    script = (" ".join(shlex.quote(c) for c in command)
              + ' --nnodes "$NNODES" --node-rank "$NODE_RANK" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT"')
    start = time.monotonic()
    testbed(args.profile_a, script, 4 * 3600)
    print(f"offline: acspeed-tune took {(time.monotonic() - start) / 60:.1f} min", flush=True)
    return db


def decision_of(db: pathlib.Path) -> dict:
    """The store's active decision and, for an online one, where its exploration ended."""
    if not db.exists():
        return {"stored": False}
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT d.config_json, d.speedup, d.ci_low, d.ci_high, s.kind, s.options_json "
                           "FROM decisions d LEFT JOIN sessions s ON s.id = d.session_id "
                           "ORDER BY d.active DESC, d.id DESC LIMIT 1").fetchone()
    if row is None:
        return {"stored": False}
    config, speedup, low, high, kind, options = row
    out = {"stored": True, "config": json.loads(config), "speedup": speedup, "ci": [low, high], "kind": kind}
    if kind == "online":
        out["decision_from_step"] = json.loads(options)["online"].get("decision_from_step")
    return out


def ratio(numerators, denominators) -> dict:
    """Geometric mean of numerators[i] / denominators[i] with its 95% interval (paired bootstrap)."""
    result = stats.paired(numerators, denominators)
    return {"ratio": result["ratio"], "ci95": list(result["ratio_ci95"]), "n": result["pairs"]}


def text(r: dict) -> str:
    return f"{r['ratio']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}] (n={r['n']})"


def part_a(args, work: pathlib.Path) -> dict:
    offline = offline_store(args, work)
    kinds = ("online", "plain", "offline", "second")
    lines = ["set -e"]
    for i in range(args.pairs):
        db = work / f"online-{i}.db"
        env = {"online": f"ACSPEED_DB={db}", "plain": "ACSPEED_DISABLE=1",
               "offline": f"ACSPEED_DB={offline} ACSPEED_ONLINE=0", "second": f"ACSPEED_DB={db}"}
        # Rotated so no kind always runs first; the second job always after the online one it reuses.
        order = [("plain", "online", "second", "offline"), ("offline", "plain", "online", "second"),
                 ("online", "second", "offline", "plain"), ("online", "offline", "plain", "second")][i % 4]
        for kind in order:
            lines.append(job_line(args.steps, work / f"a-{kind}-{i}.json", env[kind]))
    testbed(args.profile_a, "\n".join(lines), 24 * 3600)
    runs = {kind: [json.loads((work / f"a-{kind}-{i}.json").read_text()) for i in range(args.pairs)] for kind in kinds}
    whole = {kind: [r["whole_job_s"] for r in runs[kind]] for kind in kinds}
    p50 = {kind: [float(np.median(r["step_times_s"][args.skip:])) for r in runs[kind]] for kind in kinds}
    online_stored = [decision_of(work / f"online-{i}.db") for i in range(args.pairs)]
    out = {"profile": args.profile_a, "offline_decision": decision_of(offline), "online_decisions": online_stored,
           "whole_job_s": whole, "step_p50_s": p50, "jobs": runs,
           "online_speedup_vs_plain": ratio(whole["plain"], whole["online"]),
           "offline_speedup_vs_plain": ratio(whole["plain"], whole["offline"]),
           # online's whole-job speedup as a share of offline's = offline time / online time
           "online_share_of_offline": ratio(whole["offline"], whole["online"]),
           "second_vs_offline_step_p50": ratio(p50["second"], p50["offline"])}
    print(f"(a) {args.profile_a}, {args.steps} steps: whole-job speedup over plain DDP: online "
          f"{text(out['online_speedup_vs_plain'])}, offline decision {text(out['offline_speedup_vs_plain'])}; "
          f"online / offline {text(out['online_share_of_offline'])}", flush=True)
    print(f"    online decisions: {[(d.get('config'), d.get('decision_from_step')) for d in online_stored]}")
    unsettled = sum(not d["stored"] for d in online_stored)
    print(f"(c) second run's step p50 / the offline decision's: {text(out['second_vs_offline_step_p50'])}"
          + (f"; {unsettled} of {args.pairs} online job(s) did not settle within --steps {args.steps}: their second "
             "job tuned again, so (c) does not measure a remembered decision" if unsettled else ""), flush=True)
    return out


def part_b(args, work: pathlib.Path) -> dict:
    lines = ["set -e"]
    for i in range(args.pairs_1gbit):
        online = job_line(args.steps, work / f"b-online-{i}.json", f"ACSPEED_DB={work / f'b-online-{i}.db'}")
        plain = job_line(args.steps, work / f"b-plain-{i}.json", "ACSPEED_DISABLE=1")
        lines += [online, plain] if i % 2 == 0 else [plain, online]
    testbed(args.profile_b, "\n".join(lines), 24 * 3600)
    runs = {kind: [json.loads((work / f"b-{kind}-{i}.json").read_text()) for i in range(args.pairs_1gbit)]
            for kind in ("online", "plain")}
    whole = {kind: [r["whole_job_s"] for r in runs[kind]] for kind in runs}
    out = {"profile": args.profile_b, "whole_job_s": whole, "jobs": runs,
           "online_decisions": [decision_of(work / f"b-online-{i}.db") for i in range(args.pairs_1gbit)],
           "online_vs_plain": ratio(whole["plain"], whole["online"])}
    print(f"(b) {args.profile_b}, {args.steps} steps: whole-job plain / online {text(out['online_vs_plain'])}",
          flush=True)
    return out


def main() -> None:
    args = parse_args()
    result = {"command": [sys.executable] + sys.argv, "steps": args.steps, "model": "resnet18 32x32, batch 16, fp32",
              "whole_job": "wall time from DDP construction to the last step's end, max over ranks"}
    work = pathlib.Path(tempfile.mkdtemp(prefix="acspeed-online-bench-"))
    try:
        if args.only in (None, "a"):
            result["a"] = part_a(args, work)
        if args.only in (None, "b"):
            result["b"] = part_b(args, work)
    except BaseException:
        print(f"the jobs that finished left their figures and stores in {work} (kept)", file=sys.stderr)
        raise
    shutil.rmtree(work)
    out = pathlib.Path(args.out)
    if out.exists():
        raise SystemExit(f"{out} exists: not overwritten (the figures are above)")
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
