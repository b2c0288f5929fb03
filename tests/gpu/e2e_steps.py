"""The steps of tests/gpu/check_e2e.sh that read what the product wrote (standard library only, so they
run with any Python and are tested on the CPU by tests/python/test_gpu_e2e_check.py):

  e2e_steps.py decision REPORT.json ACTIVE.json IMPORT.json ALGORITHM
      the session's decision (acspeed-tune report --format json; configs export --active) must be keyed
      and labelled as tuned with shared GPUs; prints "tuned" when it carries an NCCL rule, else writes
      IMPORT.json (the searched config with the rule, under the decision's key, active) and prints
      "imported"
  e2e_steps.py nccl LOG ALGORITHM
      in one rank's NCCL log: every allreduce NCCL tuned after the plugin's first use of its rule ran
      with the rule's algorithm (and there was one)
  e2e_steps.py cupti BENCH.json
      the benchmark's --profile breakdown: backend cupti, NCCL kernels counted as communication,
      exposed communication below the step
  e2e_steps.py group REPORT.json|BENCH.json IMPLEMENTATION
      the implementation that ran the default process group ("nccl2", "nccl"), as the tuning report
      (its session's versions: the workers') or the benchmark's JSON records it, is IMPLEMENTATION

Each prints what it found; a failed step exits non-zero with the reason."""
import json
import re
import sys


def decision(report: dict, active: dict, algorithm: str):
    """("tuned", None) or ("imported", the decisions document to import); ValueError says what is wrong."""
    chosen = next((d for d in active["decisions"] if d["id"] == report["decision"]["id"]), None)
    if chosen is None:
        raise ValueError(f"the session's decision #{report['decision']['id']} is not the active one")
    print(f"decision #{chosen['id']}: {report['decision']['config_text']} (speedup {chosen['speedup']}, "
          f"[{chosen['ci_low']}, {chosen['ci_high']}]); evidence: GPUs shared {chosen['evidence'].get('gpus_shared')}")
    if not chosen.get("gpus_shared"):
        raise ValueError("the decision is not keyed as tuned with shared GPUs")
    if not chosen["evidence"].get("gpus_shared"):
        raise ValueError("the decision's evidence does not say the GPUs were shared")
    if chosen["config"].get("nccl_rules"):
        return "tuned", None
    searched = [t for t in report["trials"] if t["role"] == "search" and t["status"] == "ok"
                and t["config"].get("nccl_rules")]
    if not searched:
        raise ValueError(f"no successful searched trial carried an NCCL rule: "
                         f"{[(t['role'], t['status'], t['config_text']) for t in report['trials']]}")
    rule = searched[0]["config"]["nccl_rules"][0]
    if rule["algorithm"] != algorithm:
        raise ValueError(f"the searched rule is {rule}, not algorithm {algorithm}")
    imported = dict(chosen, config=searched[0]["config"], active=True, speedup=None, ci_low=None, ci_high=None,
                    note=f"imported by tests/gpu/check_e2e.sh: searched trial {searched[0]['ordinal']} "
                         f"({searched[0]['config_text']}); the tuner kept DDP defaults")
    return "imported", dict(active, decisions=[imported])


ALLREDUCE = re.compile(r"AllReduce: \d+ Bytes -> Algo (\S+) ")
FIRST_USE = re.compile(r"TUNER/acspeed: rule \d+ .* first applied to ")


def nccl_rule_followed(log: str, algorithm: str) -> str:
    """What NCCL did after the rule's first use; ValueError when an allreduce ran otherwise or none ran."""
    lines = log.splitlines()
    start = next((i for i, line in enumerate(lines) if FIRST_USE.search(line)), None)
    if start is None:
        raise ValueError("the plugin never logged the first use of its rule")
    chosen = [m.group(1) for m in map(ALLREDUCE.search, lines[start + 1:]) if m]
    if not chosen:
        raise ValueError("NCCL logged no allreduce after the rule's first use")
    others = sorted({name for name in chosen if name != algorithm.upper()})
    if others:
        raise ValueError(f"{len(chosen) - chosen.count(algorithm.upper())} of {len(chosen)} allreduce(s) after the "
                         f"rule's first use ran as {', '.join(others)}, not {algorithm.upper()}")
    return f"{lines[start].strip()}\n{len(chosen)} allreduce(s) after it, all {algorithm.upper()}"


def cupti(bench: dict) -> str:
    """The p50 breakdown; ValueError when it does not show what the check proves."""
    profile = bench.get("profile")
    if not profile:
        raise ValueError("the benchmark wrote no profile (--profile)")
    p50 = next(row for row in profile["rows"] if row["percentile"] == 50.0)
    found = (f"backend {profile['backend']}, p50: step {p50['wall_s'] * 1e3:.2f} ms, compute "
             f"{p50['compute_s'] * 1e3:.2f} ms, communication {p50['comm_s'] * 1e3:.2f} ms, exposed "
             f"{p50['exposed_comm_s'] * 1e3:.2f} ms")
    problems = [text for ok, text in [
        (profile["backend"] == "cupti", "the probe's backend is not cupti"),
        (p50["comm_s"] > 0, "no NCCL kernel time counted as communication"),
        (p50["exposed_comm_s"] < p50["wall_s"], "exposed communication is not below the step"),
    ] if not ok]
    if problems:
        raise ValueError(f"{found}: {'; '.join(problems)}")
    return found


def process_group(document: dict, expected: str) -> str:
    """Which implementation ran the default process group; ValueError when not `expected`."""
    versions = document["session"]["versions"] if "session" in document else document["versions"]
    ran = versions.get("process_group") or "not recorded"
    if ran != expected:
        raise ValueError(f"the default process group ran on {ran}, not {expected}")
    return f"process group: {ran}"


def main(argv) -> int:
    step, args = argv[0], argv[1:]
    try:
        if step == "decision":
            report, active = (json.load(open(path, encoding="utf-8")) for path in args[:2])
            path, document = decision(report, active, args[3])
            if document is not None:
                with open(args[2], "w", encoding="utf-8") as out:
                    json.dump(document, out)
            print(path)
        elif step == "nccl":
            print(nccl_rule_followed(open(args[0], encoding="utf-8", errors="replace").read(), args[1]))
        elif step == "cupti":
            print(cupti(json.load(open(args[0], encoding="utf-8"))))
        elif step == "group":
            print(process_group(json.load(open(args[0], encoding="utf-8")), args[1]))
        else:
            print(f"e2e_steps.py: step '{step}' is not one of decision, nccl, cupti, group", file=sys.stderr)
            return 2
    except (ValueError, KeyError, StopIteration) as error:
        print(f"FAIL: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
