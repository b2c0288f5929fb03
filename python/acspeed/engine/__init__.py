"""acspeed's comm hook engine: what runs inside DDP's backward for a config that needs a hook.
Loaded at the first DDP construction that installs a hook (acspeed._patch.install_hook), never by
`import acspeed`.

    state.py        HookState: one DDP model's hook, the per-bucket flow, the step's end, a config
                    replaced between steps (replace_config)
    compressor.py   the compressor interface and its table (COMPRESSORS, by wire form)
    cast.py         the plain path and the cast compressions (fp16, bf16)
    powersgd.py     PowerSGD: low-rank factors with error feedback (LowRank, plan(PlanOptions))
    guard.py        the compression guard's pieces (the NaN/Inf flag, which dtypes can overflow)
    algorithms.py   the phases of one bucket per algorithm (ALGORITHMS)
    lanes.py        the lanes: process groups (and CUDA streams) buckets are spread over
    issue.py        the issuers: when each phase's collective is issued (ISSUERS)
    buffers.py      buffers reused across steps
    collectives.py  which collectives the backend has (checked once)
"""
