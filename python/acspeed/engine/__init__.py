"""acspeed's comm hook engine: what runs inside DDP's backward for a config that needs a hook.
Loaded at the first DDP construction that installs a hook (acspeed._patch.install_hook), never by
`import acspeed`.

    state.py        HookState: one DDP model's hook, the per-bucket flow and the step's end
    algorithms.py   the phases of one bucket per algorithm (ALGORITHMS)
    lanes.py        the lanes: process groups (and CUDA streams) buckets are spread over
    issue.py        the issuers: when each phase's collective is issued (ISSUERS)
    buffers.py      buffers reused across steps
    collectives.py  which collectives the backend has (probed once)
    powersgd.py     PowerSGD: low-rank factors with error feedback
"""
