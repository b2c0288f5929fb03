"""The tuner's side of acspeed, private; nothing here is imported by `import acspeed`.

    worker.py             the trial worker `acspeed-tune` launches under torchrun (its module name is
                          tuner/src/worker_module.h's): arguments, logs, the Trainer, the control loop
    steps.py              the one step loop every mode runs, the optimizer and scaler, the loss
    timing.py             the timed trial and the compute-only step (their step callbacks)
    convergence_guard.py  the guard's worker half: the fidelity window and the loss trajectory
    models.py             --model: a torchvision model or pkg.module:function
    batches.py            the batches of the trials and trajectories (--data or synthetic)
    protocol.py           the JSON-lines messages to and from the tuner
"""
