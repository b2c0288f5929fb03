"""The README's quick start, run as written: every command of its "Quick start" section in order (on
an empty store, with this build's acspeed-tune), and every output line the README quotes must match a
line of the real output, in order. Numbers are masked (they differ from run to run; not digits inside
a word, such as p50 or resnet18), "…" stands for
anything, runs of spaces count as one, and the README's instance type stands for this machine's.
When acspeed's output changes, this test makes the README change with it. About 2-4 minutes."""
import json
import os
import re
import shlex
import socket
import subprocess
import sys

import pytest

from conftest import REPO

README = REPO / "README.md"
README_INSTANCE = "cpu-2xIntel-Xeon"  # the instance type the README's quotes were recorded on
NUMBER = re.compile(r"(?<![A-Za-z])\d+(?:\.\d+)?")
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
OUTPUT_MARK = "<!-- output of the command above"


def quick_start_steps(text: str) -> list:
    """[(command, quoted output lines or None)] of the "Quick start" section, in order."""
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    steps, position = [], 0
    for block in BLOCK.finditer(section):
        language, body = block.group(1), block.group(2)
        between = section[position:block.start()]
        position = block.end()
        if language == "sh":
            steps.append([body.strip(), None])
        elif language == "text" and OUTPUT_MARK in between and steps and steps[-1][1] is None:
            steps[-1][1] = [line for line in body.splitlines() if line.strip()]
    return [tuple(step) for step in steps]


def pattern(quoted: str, instance: str) -> re.Pattern:
    """A quoted line as a pattern: numbers masked, "…" anything, spaces collapsed."""
    parts = []
    for piece in re.split(f"(…|{NUMBER.pattern}|\\s+)", " ".join(quoted.replace(README_INSTANCE, instance).split())):
        if piece == "…":
            parts.append(".*")
        elif re.fullmatch(r"\d+(?:\.\d+)?", piece):
            parts.append(r"\d+(?:\.\d+)?")
        elif piece.isspace():
            parts.append(r"\s+")
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def unmatched(quoted: list, output: str, instance: str) -> list:
    """The quoted lines that match no line of `output` after the previous quoted line's match."""
    lines = [" ".join(line.split()) for line in output.splitlines()]
    missing, at = [], 0
    for line in quoted:
        wanted = pattern(line, instance)
        found = next((i for i in range(at, len(lines)) if wanted.fullmatch(lines[i])), None)
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing


def test_the_matching_rules():
    assert unmatched(["p50: 0.901s 9/s", "decision 1 (now active for cpu-2xIntel-Xeon / x): …"],
                     "noise\np50:  1.25s 12/s\ndecision 3 (now active for cpu-8xAMD / x): keep DDP defaults",
                     "cpu-8xAMD") == []
    assert unmatched(["p50: 0.901s 9/s"], "p90: 0.901s 9/s", "x") == ["p50: 0.901s 9/s"]
    assert unmatched(["b", "a"], "a\nb", "x") == ["a"]  # in order


def _argv(command: str, tune_binary) -> list:
    argv = shlex.split(command, comments=True)
    if argv[0] == "acspeed-tune":
        return [str(tune_binary), *argv[1:]]
    if argv[:3] == ["python", "-m", "torch.distributed.run"]:
        with socket.socket() as s:  # not torchrun's fixed default port: tests run side by side
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        return [sys.executable, "-m", "torch.distributed.run", "--master_port", str(port), *argv[3:]]
    raise AssertionError(f"the quick start has a command this test does not know how to run: {command}")


@pytest.mark.slow
def test_the_readme_quick_start_prints_what_it_quotes(tune_binary, isolated_store, tmp_path):
    steps = quick_start_steps(README.read_text())
    assert len(steps) >= 3 and sum(quoted is not None for _, quoted in steps) >= 2, steps
    env = dict(os.environ, ACSPEED_DB=str(isolated_store), PYTHONUNBUFFERED="1")  # the lines in the order printed
    env.pop("ACSPEED_DISABLE", None)
    instance = subprocess.run([str(tune_binary), "fingerprint", "--json"], capture_output=True, text=True,
                              timeout=120, env=env, check=True)
    instance = json.loads(instance.stdout)["instance_type"]
    for command, quoted in steps:
        argv = [arg.replace("report.html", str(tmp_path / "report.html")) for arg in _argv(command, tune_binary)]
        result = subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=900, env=env)
        output = result.stdout
        assert result.returncode == 0, f"{command}\nexited {result.returncode}:\n{output[-3000:]}"
        if quoted is not None:
            missing = unmatched(quoted, output, instance)
            assert not missing, f"{command}\nthe README quotes lines it did not print: {missing}\n" \
                                f"it printed:\n{output[-6000:]}"
    assert (tmp_path / "report.html").stat().st_size > 0
