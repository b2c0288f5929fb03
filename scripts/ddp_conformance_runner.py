"""torch's own DDP tests (torch.testing._internal.distributed.distributed_test, shipped in torch's
wheel) in ranks that import acspeed: run by scripts/ddp_conformance.sh, once per config family.

Environment (set by the script): ACSPEED_CONFORMANCE_FAMILY (baseline: acspeed is not imported at
all; any other family: `import acspeed` in every rank, with ACSPEED_CONFIG forcing that family's
config; online: none, so the job is tuned online, with short windows), ACSPEED_CONFORMANCE_TESTS (space-separated test names; empty: every DDP test of the class),
ACSPEED_CONFORMANCE_RESULT (the JSON file written: test name -> {"outcome", "detail"}), and torch's
BACKEND, WORLD_SIZE, TEMP_DIR. Each test spawns WORLD_SIZE ranks; spawn re-runs this module in each,
so the import below happens in every rank before DDP is built."""
import json
import os
import sys
import time
import unittest

FAMILY = os.environ["ACSPEED_CONFORMANCE_FAMILY"]
if FAMILY != "baseline":
    import acspeed  # noqa: F401 - patches DDP in this rank
if FAMILY == "online":  # no decision: the first DDP model of each rank is tuned online; torch's tests run
    import acspeed.online  # a few steps, so short windows switch configs inside them (the test-only seam):
    # in a 20-step test the job's own DDP (no hook) runs steps 1-6, the first candidate 7-19 (acspeed's hook
    # registered on the running reducer, or nothing for a bucket size that changes no bucket), and the
    # job's own DDP would come back at step 20, by a rebuilt reducer, whose logger restarts the iteration
    # count and runtime statistics test_ddp_logging_data_cpu checks (docs/ddp-conformance.md).
    acspeed.online.testing(warmup=1, window_steps=6, discard_steps=1)

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402


class TestDdpConformance(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


# DDP tests whose names do not say so (their bodies build DistributedDataParallel on gloo).
_ALSO_DDP = ("test_static_graph_api_cpu", "test_grads_same_across_ranks_with_no_sync")


def _is_ddp_test(name: str) -> bool:
    lowered = name.lower()
    named = "ddp" in lowered or "distributeddataparallel" in lowered
    return name in _ALSO_DDP or (name.startswith("test_") and named)


def _selected() -> list:
    wanted = os.environ.get("ACSPEED_CONFORMANCE_TESTS", "").split()
    names = sorted(name for name in unittest.TestLoader().getTestCaseNames(TestDdpConformance) if _is_ddp_test(name))
    if wanted:
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise SystemExit(f"not DDP tests of this torch: {', '.join(unknown)}")
        names = [name for name in names if name in wanted]
    return names


class _Recorder(unittest.TextTestResult):
    """Also keeps each test's outcome and time for the JSON file."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}
        self._started = 0.0

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def _keep(self, test, outcome, detail=""):
        self.outcomes[test._testMethodName] = {"outcome": outcome, "detail": detail,
                                               "seconds": round(time.monotonic() - self._started, 1)}

    def addSuccess(self, test):
        super().addSuccess(test)
        self._keep(test, "pass")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._keep(test, "skip", reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._keep(test, "fail", self._exc_info_to_string(err, test)[-4000:])

    def addError(self, test, err):
        super().addError(test, err)
        self._keep(test, "error", self._exc_info_to_string(err, test)[-4000:])

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._keep(test, "pass", "expected failure (torch's own marker)")


def main() -> int:
    suite = unittest.TestSuite(TestDdpConformance(name) for name in _selected())
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_Recorder, stream=sys.stdout)
    result = runner.run(suite)
    with open(os.environ["ACSPEED_CONFORMANCE_RESULT"], "w") as out:
        json.dump(result.outcomes, out, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
