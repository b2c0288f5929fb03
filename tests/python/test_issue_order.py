"""The issuers' ordering logic with fake works and groups, in one process (no backend, well under a
second): whatever order collectives complete in, every group sees its collectives issued in bucket
order (so two ranks with different timings issue the same sequence), a non-blocking advance never
waits, the last bucket's drain issues everything, and on CUDA's path every phase is issued in the
hook call with a stream wait between dependent phases."""
import random

import torch

from acspeed.engine.issue import CompletionOrdered, Job, StreamOrdered


class FakeWork:
    def __init__(self, log, group, bucket):
        self.log, self.group, self.bucket = log, group, bucket
        self.done = False
        self.future = torch.futures.Future()
        self.waited_incomplete = False
        self.blocked_streams = 0

    def complete(self):
        if not self.done:
            self.done = True
            self.future.set_result([torch.zeros(1)])

    def is_completed(self):
        return self.done

    def wait(self):
        if not self.done:
            self.waited_incomplete = True
        self.complete()
        return True

    def get_future(self):
        return self.future

    def synchronize(self):  # NCCL's Work: the current stream waits for it
        self.blocked_streams += 1

    def block_current_stream(self):  # nccl2's falls to c10d's generic spin kernel: never used
        raise AssertionError("block_current_stream called; the stream wait is synchronize()")


class FakeLane:
    def __init__(self, index, slots):
        self.index, self.slots = index, [f"lane{index}/slot{slot}" if member else None
                                         for slot, member in enumerate(slots)]


def make_jobs(buckets, lanes, phases_per_job, issued, works, skip=()):
    """Jobs whose phase p issues one FakeWork on slot p; (bucket, p) in `skip` has nothing to do."""
    jobs = []
    for bucket in range(buckets):
        lane = lanes[bucket % len(lanes)]

        def phase(p, bucket=bucket):
            def issue(group):
                work = FakeWork(issued, group, bucket)
                issued.append((group, bucket))
                works.append(work)
                return work
            return None if (bucket, p) in skip else issue
        finished = []
        job = Job(index=bucket, lane=lane, phases=[phase(p) for p in range(phases_per_job)],
                  finish=lambda finished=finished, bucket=bucket: finished.append(bucket) or torch.full((1,), bucket),
                  result=torch.futures.Future())
        job.finished_log = finished
        jobs.append(job)
    return jobs


def run_rank(seed, buckets=9, lanes=3, phases=3, skip=()):
    """One simulated rank: hook calls in bucket order, works completing in a seeded random order in
    between, then the last bucket's drain. Returns the issue sequence per group and the jobs."""
    rng = random.Random(seed)
    issued, works = [], []
    lane_objects = [FakeLane(i, [True] * phases) for i in range(lanes)]
    jobs = make_jobs(buckets, lane_objects, phases, issued, works, skip)
    issuer = CompletionOrdered()
    for job in jobs:
        for work in rng.sample(works, k=rng.randint(0, len(works))):  # some in-flight work completes
            work.complete()
        issuer.advance(block=False)
        issuer.start(job)
    assert not any(work.waited_incomplete for work in works)  # hook calls never wait
    issuer.advance(block=True)
    per_group = {}
    for group, bucket in issued:
        per_group.setdefault(group, []).append(bucket)
    return per_group, jobs, works


def test_completion_order_never_changes_the_issue_order_on_a_group():
    reference, _, _ = run_rank(seed=0)
    for seed in range(1, 30):
        per_group, jobs, works = run_rank(seed)
        assert per_group == reference, seed
        for group, buckets in per_group.items():
            assert buckets == sorted(buckets), (group, buckets)  # bucket order on every group
        for work in works:  # the last phases' works complete: every job's finish runs
            work.complete()
        assert all(job.result.done() and job.result.value().item() == job.index for job in jobs)


def test_phases_with_nothing_to_do_keep_the_order():
    skip = {(1, 1), (4, 0), (4, 2), (7, 1)}  # e.g. a non-leader's inter-node step, an emulated phase
    reference, _, _ = run_rank(seed=0, skip=skip)
    for seed in range(1, 20):
        per_group, jobs, works = run_rank(seed, skip=skip)
        assert per_group == reference, seed
        for work in works:
            work.complete()
        assert all(job.result.done() for job in jobs)


def test_a_non_blocking_advance_never_waits_and_the_drain_issues_everything():
    issued, works = [], []
    lanes = [FakeLane(0, [True, True])]
    jobs = make_jobs(3, lanes, 2, issued, works)
    issuer = CompletionOrdered()
    for job in jobs:
        issuer.start(job)
        issuer.advance(block=False)
    assert [bucket for _, bucket in issued] == [0, 1, 2]  # nothing completed: only first phases
    works[1].complete()  # bucket 1's first phase completes before bucket 0's
    issuer.advance(block=False)
    assert [bucket for _, bucket in issued] == [0, 1, 2]  # bucket 1 waits behind bucket 0
    assert not any(work.waited_incomplete for work in works)
    works[0].complete()
    issuer.advance(block=False)
    assert issued[3:] == [("lane0/slot1", 0), ("lane0/slot1", 1)]
    issuer.advance(block=True)
    assert issued[5:] == [("lane0/slot1", 2)]
    for work in works:
        work.complete()
    assert [job.result.value().item() for job in jobs] == [0, 1, 2]


def test_stream_ordered_issues_every_phase_in_the_hook_call_with_stream_waits_between():
    issued, works = [], []
    lanes = [FakeLane(0, [True, True, True])]
    jobs = make_jobs(2, lanes, 3, issued, works, skip={(1, 1)})
    issuer = StreamOrdered()
    issuer.start(jobs[0])
    assert issued == [("lane0/slot0", 0), ("lane0/slot1", 0), ("lane0/slot2", 0)]
    assert [work.blocked_streams for work in works] == [1, 1, 0]  # each phase waits on the one before
    issuer.start(jobs[1])  # its middle phase has nothing to do: the last waits on the first
    assert issued[3:] == [("lane0/slot0", 1), ("lane0/slot2", 1)]
    assert [work.blocked_streams for work in works[3:]] == [1, 0]
    assert not jobs[0].result.done()
    works[2].complete()
    assert jobs[0].result.value().item() == 0 and not any(work.waited_incomplete for work in works)
