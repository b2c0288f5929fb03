"""The tuner <-> worker protocol, Python side: one JSON object per line, each with "v" (the version)
and "type". tuner/src/protocol.h documents every message and is the tuner's side; the trial worker
(acspeed._worker.worker) and every test that plays the tuner or a worker build and read messages here.

Importing this module needs neither torch nor the compiled runtime (the tests' fake worker loads it
by its path)."""
import json
from typing import Optional

VERSION = 1  # tuner/src/protocol.h: kProtocolVersion


class ProtocolError(RuntimeError):
    """A line that is not a message of this version."""


def encode(message: dict) -> bytes:
    """One message as a line (no NaN: JSON has none)."""
    return (json.dumps(message, allow_nan=False) + "\n").encode()


def decode(line: str) -> dict:
    """The message on `line`; ProtocolError when it is another version's."""
    message = json.loads(line)
    if message.get("v") != VERSION:
        raise ProtocolError(f"tuner speaks protocol {message.get('v')}, this worker {VERSION}")
    return message


def _message(kind: str, **fields) -> dict:
    return {"v": VERSION, "type": kind, **fields}


# worker -> tuner
def hello(**fields) -> dict:
    """Rank 0's first message: the job and the model (world_size, nnodes, model_signature, ...)."""
    return _message("hello", **fields)


def fatal(error: str, usage: bool) -> dict:
    """Setup failed (usage: the --model given names nothing buildable); the worker exits."""
    return _message("fatal", error=error, usage=usage)


def result(trial_id: int, **measured) -> dict:
    """An ok trial's result: step_times_s, losses, finite and the other measurements."""
    return _message("result", id=trial_id, status="ok", **measured)


def failed(trial_id: int, error: str) -> dict:
    """A trial that failed, and why; the workers end."""
    return _message("result", id=trial_id, status="failed", error=error)


# tuner -> worker
def trial(trial_id: int, config: dict, warmup: int, steps: int, mode: Optional[str] = None,
          fidelity_steps: Optional[int] = None, trajectory_steps: Optional[int] = None) -> dict:
    """One trial of `config` (CommConfig JSON as an object); mode absent = "ddp"; fidelity_steps
    and trajectory_steps absent = 0."""
    message = _message("trial", id=trial_id, config=config, warmup=warmup, steps=steps)
    if mode is not None:
        message["mode"] = mode
    if fidelity_steps is not None:
        message["fidelity_steps"] = fidelity_steps
    if trajectory_steps is not None:
        message["trajectory_steps"] = trajectory_steps
    return message


def stop() -> dict:
    """The session is over: the workers end."""
    return _message("stop")
