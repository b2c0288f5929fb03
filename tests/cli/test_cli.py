"""acspeed-tune's store commands as a user runs them: exit codes, messages, files left unchanged."""
import hashlib
import json
import math
import os
import pathlib
import shutil
import sqlite3
import subprocess
import tempfile

import pytest


@pytest.fixture()
def tune(tune_binary, tmp_path):
    binary = tune_binary
    env = dict(os.environ)
    for name in list(env):
        if name.startswith("ACSPEED_"):
            del env[name]
    env["ACSPEED_DB"] = str(tmp_path / "store" / "acspeed.db")

    def run(*args, user=None, **extra_env):
        cmd = [str(binary), *args]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]  # numeric ids
        return subprocess.run(cmd, capture_output=True, text=True, env={**env, **extra_env}, timeout=60)

    run.db = tmp_path / "store" / "acspeed.db"
    return run


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def decision_doc(**overrides):
    decision = {
        "instance_type": "cpu-2xTest", "model_signature": "p2-00000000deadbeef", "model_name": "resnet18",
        "precision": "amp", "world_size": 2, "nnodes": 1, "active": True,
        "config": {"version": 1, "bucket_cap_mb": 5, "streams": 2}, "torch_version": "2.15.0",
        "batch_size": 32, "speedup": 1.4, "ci_low": 1.2, "ci_high": 1.6,
    }
    decision.update(overrides)
    return {"format": "acspeed-decisions", "version": 1, "decisions": [decision]}


def test_help_version_and_unknown_command(tune):
    assert tune("--version").stdout.startswith("acspeed-tune ")
    out = tune("--help")
    assert out.returncode == 0 and "configs" in out.stdout and "fingerprint" in out.stdout
    bad = tune("frobnicate")
    assert bad.returncode == 2 and "unknown command 'frobnicate'" in bad.stderr


def test_fingerprint_prints_key_and_details(tune):
    out = tune("fingerprint", "--json")
    assert out.returncode == 0, out.stderr
    fp = json.loads(out.stdout)
    assert fp["instance_type"] == fp["detected_key"] and not fp["explicit"]
    assert fp["details"]["torch"] != ""
    assert os.uname().nodename not in fp["instance_type"]
    named = json.loads(tune("fingerprint", "--json", ACSPEED_INSTANCE_TYPE="ecs.ebmgn7t.32xlarge").stdout)
    assert named["instance_type"] == "ecs.ebmgn7t.32xlarge" and named["explicit"]
    assert named["detected_key"] == fp["detected_key"]
    table = tune("fingerprint", ACSPEED_INSTANCE_TYPE="2x1@1gbit").stdout
    assert "instance type: 2x1@1gbit  (from ACSPEED_INSTANCE_TYPE" in table


def test_env_lists_every_setting(tune):
    out = tune("env", ACSPEED_STREAMS="4")
    assert out.returncode == 0
    for name in ("ACSPEED_DB", "ACSPEED_INSTANCE_TYPE", "ACSPEED_CONFIG", "ACSPEED_DISABLE", "ACSPEED_STRICT",
                 "ACSPEED_PYTHON", "ACSPEED_STREAMS"):
        assert name in out.stdout
    streams_line = next(line for line in out.stdout.splitlines() if line.startswith("ACSPEED_STREAMS"))
    assert " 4 " in streams_line


def test_configs_list_on_new_empty_store(tune):
    out = tune("configs", "list")
    assert out.returncode == 0 and "no decisions stored" in out.stdout
    assert not tune.db.exists()  # reading never creates a store


def test_import_export_show_activate_delete(tune, tmp_path):
    doc = tmp_path / "in.json"
    doc.write_text(json.dumps(decision_doc()))
    assert tune("configs", "import", str(doc)).returncode == 0
    second = decision_doc(config={"version": 1, "algorithm": "reduce_scatter"})
    doc.write_text(json.dumps(second))
    assert tune("configs", "import", str(doc)).returncode == 0
    listed = json.loads(tune("configs", "list", "--json").stdout)["decisions"]
    assert [d["active"] for d in listed] == [False, True]  # history kept, newest active
    assert "reduce_scatter" in tune("configs", "list").stdout
    assert tune("configs", "activate", "1").returncode == 0
    shown = json.loads(tune("configs", "show", "1", "--json").stdout)["decisions"][0]
    assert shown["active"] and shown["config"]["streams"] == 2

    out_file = tmp_path / "out.json"
    assert tune("configs", "export", "-o", str(out_file)).returncode == 0
    exported = json.loads(out_file.read_text())
    assert len(exported["decisions"]) == 2
    before = sha(out_file)
    refused = tune("configs", "export", "-o", str(out_file))
    assert refused.returncode != 0 and "--force" in refused.stderr and sha(out_file) == before
    assert tune("configs", "export", "-o", str(out_file), "--force", "--active").returncode == 0
    assert len(json.loads(out_file.read_text())["decisions"]) == 1

    assert tune("configs", "delete", "2").returncode == 0
    missing = tune("configs", "show", "2")
    assert missing.returncode == 2 and "no decision 2" in missing.stderr


def test_bad_input_is_one_line_naming_the_value(tune, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(decision_doc(config={"version": 1, "algorithm": "warp"})))
    out = tune("configs", "import", str(bad))
    assert out.returncode == 2 and "'warp' is not one of allreduce" in out.stderr
    assert not tune.db.exists()
    out = tune("configs", "show", "abc")
    assert out.returncode == 2 and "abc" in out.stderr
    out = tune("configs", "launch")
    assert out.returncode == 2 and "'launch' is not one of list" in out.stderr
    out = tune("--log-level", "loud", "env")
    assert out.returncode == 2 and "'loud'" in out.stderr


def make_store_with_sessions(tune, tmp_path, *sessions):
    """A store acspeed-tune made (by importing a decision), holding `sessions` as the tuner stores them:
    (model, status, instance type, finished_at or None) each."""
    doc = tmp_path / "decisions.json"
    doc.write_text(json.dumps(decision_doc()))
    assert tune("configs", "import", str(doc)).returncode == 0
    with sqlite3.connect(tune.db) as db:
        for model, status, instance, finished in sessions:
            db.execute("INSERT INTO sessions(instance_type, model_name, model_signature, precision, world_size, nnodes, "
                       "batch_size, strategy, seed, search_space_json, options_json, versions_json, status, started_at, "
                       "finished_at) VALUES (?, ?, 'p2-1', 'fp32', 2, 1, 8, 'grid', 1, '{}', '{}', '{}', ?, "
                       "'2026-12-06T01:00:00.000Z', ?)", (instance, model, status, finished))


def test_sessions_lists_the_ids_report_and_resume_take(tune, tmp_path):
    empty = tune("sessions")
    assert empty.returncode == 0 and "no tuning sessions in" in empty.stdout and "does not exist yet" in empty.stdout
    assert not tune.db.exists()  # reading never creates a store
    make_store_with_sessions(tune, tmp_path, ("resnet18", "done", "cpu-2xTest", "2026-12-06T01:05:00.000Z"),
                             ("vit_b_16", "interrupted", "8xH100", None))
    out = tune("sessions")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["ID", "KIND", "STATUS", "MODEL", "PRECISION", "WORLD", "NODES", "INSTANCE", "TYPE",
                                "STARTED", "(UTC)", "FINISHED", "(UTC)"]
    assert lines[1].split() == ["1", "offline", "done", "resnet18", "fp32", "2", "1", "cpu-2xTest",
                                "2026-12-06T01:00:00.000Z", "2026-12-06T01:05:00.000Z"]
    assert lines[2].split()[:4] == ["2", "offline", "interrupted", "vit_b_16"] and lines[2].split()[-1] == "-"
    assert "acspeed-tune report --session ID" in out.stdout and "acspeed-tune --resume ID" in out.stdout
    listed = json.loads(tune("sessions", "--json", "--instance", "8xH100").stdout)
    assert listed["format"] == "acspeed-sessions" and listed["version"] == 1
    assert [(s["id"], s["kind"], s["status"], s["model_name"], s["finished_at"]) for s in listed["sessions"]] == \
        [(2, "offline", "interrupted", "vit_b_16", None)]
    assert "sessions" in tune("--help").stdout


def test_a_missing_or_bad_id_says_which_id_to_give_and_where_to_list_them(tune, tmp_path):
    give_decision = "give a decision ID (see `acspeed-tune configs list`)"
    for args in (["configs", "show"], ["configs", "delete"], ["configs", "activate"], ["configs", "show", "abc"],
                 ["configs", "delete", "0"], ["configs", "show", "99"]):
        out = tune(*args)
        assert out.returncode == 2 and give_decision in out.stderr and "--id" not in out.stderr, (args, out.stderr)
    assert "abc: not a decision ID (a positive integer)" in tune("configs", "show", "abc").stderr
    give_session = "give a session ID (see `acspeed-tune sessions`)"
    for args in (["report", "--session", "abc"], ["predict", "--session", "0"], ["--resume", "1x"]):
        out = tune(*args)
        assert out.returncode == 2 and give_session in out.stderr, (args, out.stderr)
    assert "--resume 1x: not a session ID" in tune("--resume", "1x").stderr
    make_store_with_sessions(tune, tmp_path, ("resnet18", "interrupted", "cpu-2xTest", None))
    unknown = tune("report", "--session", "7")
    assert unknown.returncode == 1 and "no tuning session 7" in unknown.stderr and give_session in unknown.stderr
    unknown = tune("--resume", "7")
    assert unknown.returncode == 2 and "--resume 7: no such session" in unknown.stderr and give_session in unknown.stderr


def test_corrupt_store_is_refused_and_unchanged(tune, tmp_path):
    doc = tmp_path / "in.json"
    doc.write_text(json.dumps(decision_doc()))
    tune.db.parent.mkdir(parents=True)
    tune.db.write_bytes(b"SQLite format 3\x00" + b"\x13" * 5000)
    before = sha(tune.db)
    for args in (("configs", "list"), ("configs", "import", str(doc)), ("configs", "delete", "1")):
        out = tune(*args)
        assert out.returncode != 0
        assert str(tune.db) in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    assert sha(tune.db) == before
    assert sorted(p.name for p in tune.db.parent.iterdir()) == ["acspeed.db"]


def test_newer_schema_reads_and_refuses_writes(tune, tmp_path):
    doc = tmp_path / "in.json"
    doc.write_text(json.dumps(decision_doc()))
    assert tune("configs", "import", str(doc)).returncode == 0
    with sqlite3.connect(tune.db) as db:
        db.execute("PRAGMA user_version = 99")
    listed = tune("configs", "list")
    assert listed.returncode == 0 and "resnet18" in listed.stdout and "newer than this build" in listed.stderr
    refused = tune("configs", "import", str(doc))
    assert refused.returncode == 1 and "newer than this build" in refused.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to drop to user nobody (root ignores file modes)")
def test_read_only_store_reads_with_note_and_refuses_writes(tune):
    shared = pathlib.Path(tempfile.mkdtemp(prefix="acspeed-ro-"))  # reachable by user nobody
    shared.chmod(0o755)
    db = shared / "store" / "acspeed.db"
    doc = shared / "in.json"
    doc.write_text(json.dumps(decision_doc()))
    doc.chmod(0o644)
    assert tune("--db", str(db), "configs", "import", str(doc)).returncode == 0
    db.parent.chmod(0o555)
    db.chmod(0o444)
    before = sha(db)
    listed = tune("--db", str(db), "configs", "list", user=65534)
    assert listed.returncode == 0, listed.stderr
    assert "resnet18" in listed.stdout and "read-only" in listed.stderr
    refused = tune("--db", str(db), "configs", "import", str(doc), user=65534)
    assert refused.returncode == 1 and "read-only" in refused.stderr
    assert sha(db) == before
    db.parent.chmod(0o755)
    shutil.rmtree(shared)


def test_explain_reports_what_import_would_apply(tune, tmp_path):
    doc = tmp_path / "in.json"
    # The torch the recorded interpreter runs: the decision passes explain's version check.
    torch_version = json.loads(tune("fingerprint", "--json").stdout)["details"]["torch"]
    doc.write_text(json.dumps(decision_doc(instance_type="my-cluster", torch_version=torch_version)))
    assert tune("configs", "import", str(doc)).returncode == 0
    out = tune("explain", "--model", "resnet18", "--world-size", "2", "--precision", "amp",
               ACSPEED_INSTANCE_TYPE="my-cluster")
    assert out.returncode == 0, out.stderr
    assert "source: stored" in out.stdout and "bucket 5 MiB" in out.stdout
    other = tune("explain", "--model", "resnet18", "--world-size", "4", ACSPEED_INSTANCE_TYPE="my-cluster")
    assert "source: no_entry" in other.stdout and "DDP defaults" in other.stdout
    disabled = tune("explain", "--model", "resnet18", "--world-size", "2", ACSPEED_INSTANCE_TYPE="my-cluster",
                    ACSPEED_DISABLE="1")
    assert "source: disabled" in disabled.stdout


def test_import_refuses_a_decision_without_its_torch_version(tune, tmp_path):
    doc = tmp_path / "in.json"
    decision = decision_doc()
    del decision["decisions"][0]["torch_version"]
    doc.write_text(json.dumps(decision))
    out = tune("configs", "import", str(doc))
    assert out.returncode == 2 and "decisions[0]: 'torch_version' is missing" in out.stderr, out.stderr
    assert not tune.db.exists()


@pytest.mark.parametrize("garbage", ["garbage", '{"version":1e400}', '{"version":1,"streams":"two"}'])
def test_a_garbage_config_row_is_listed_refused_clearly_and_deletable(tune, tmp_path, garbage):
    """A row another tool wrote: explain says which decision and how to remove it, list and show work,
    export refuses rather than passing it off as DDP's defaults, delete removes it."""
    doc = tmp_path / "in.json"
    doc.write_text(json.dumps(decision_doc(instance_type="box")))
    assert tune("configs", "import", str(doc)).returncode == 0
    with sqlite3.connect(tune.db) as db:
        db.execute("UPDATE decisions SET config_json = ?", (garbage,))
    out = tune("explain", "--model", "resnet18", "--world-size", "2", ACSPEED_INSTANCE_TYPE="box")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "source: error" in out.stdout and "decision #1" in out.stdout and "configs delete 1" in out.stdout
    assert "internal error" not in out.stdout + out.stderr
    listed = tune("configs", "list")
    assert listed.returncode == 0 and "INVALID" in listed.stdout, listed.stderr
    shown = tune("configs", "show", "1")
    assert shown.returncode == 0 and "invalid, never applied" in shown.stdout, shown.stderr
    exported = tune("configs", "export")
    assert exported.returncode == 1 and "decision 1 holds an invalid config" in exported.stderr
    assert tune("configs", "delete", "1").returncode == 0
    assert "no decisions stored" in tune("configs", "list").stdout


def _decay(t):
    return 0.3 + 2.0 * math.exp(-t / 25.0)


def test_inflation_judges_two_recorded_loss_curves(tune, tmp_path):
    """`acspeed-tune inflation`: the tuner's rule on the user's own curves, with known answers (a curve
    against itself is 1 and passes; one stretched 2x in steps is about 2; one that never gets there is
    infinite and fails), in either file format, and bad input named with what is accepted."""
    reference = [_decay(t) for t in range(90)]
    (tmp_path / "ref.json").write_text(json.dumps(reference))
    (tmp_path / "same.txt").write_text("\n".join(f"{v:.17g}" for v in reference))  # text: one number per line
    (tmp_path / "slow.csv").write_text(",".join(str(_decay(t / 2)) for t in range(90)))
    (tmp_path / "never.json").write_text(json.dumps([_decay(t / 10) + 0.5 for t in range(90)]))

    same = tune("inflation", str(tmp_path / "same.txt"), str(tmp_path / "ref.json"))
    assert same.returncode == 0, same.stderr
    assert "steps compared: 90" in same.stdout and "step inflation: 1.00x" in same.stdout
    assert "loss check: passes" in same.stdout

    slow = json.loads(tune("inflation", str(tmp_path / "slow.csv"), str(tmp_path / "ref.json"), "--json").stdout)
    assert slow["version"] == 1 and slow["steps"] == 90
    assert slow["inflation"]["kind"] == "measured" and abs(slow["inflation"]["estimate"] - 2.0) < 0.15
    assert slow["inflation"]["low"] > 1.3
    assert not slow["loss_check"]["passed"]  # slower at the same step: its tail lies above the reference's

    never = tune("inflation", str(tmp_path / "never.json"), str(tmp_path / "ref.json"), "--steps", "60")
    assert never.returncode == 0, never.stderr
    assert "steps compared: 60 (compressed curve 90, reference 90)" in never.stdout
    assert "step inflation: infinite" in never.stdout and "loss check: fails" in never.stdout

    (tmp_path / "bad.txt").write_text("1.0 0.9 oops")
    bad = tune("inflation", str(tmp_path / "bad.txt"), str(tmp_path / "ref.json"))
    assert bad.returncode == 2 and "item 2 'oops' is not a number" in bad.stderr and "JSON array" in bad.stderr
    (tmp_path / "obj.json").write_text('[1.0, "x"]')
    bad = tune("inflation", str(tmp_path / "obj.json"), str(tmp_path / "ref.json"))
    assert bad.returncode == 2 and 'item 1 is "x", not a number' in bad.stderr
    missing = tune("inflation", str(tmp_path / "none.json"), str(tmp_path / "ref.json"))
    assert missing.returncode == 2 and "cannot be read" in missing.stderr
    too_long = tune("inflation", str(tmp_path / "same.txt"), str(tmp_path / "ref.json"), "--steps", "91")
    assert too_long.returncode == 2 and "--steps 91 is not in 1..90" in too_long.stderr
