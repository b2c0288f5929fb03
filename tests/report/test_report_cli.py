"""acspeed-tune report through the real binary: every format from a stored session, the command's
errors and exit codes, a read-only store, and the HTML page rendered by headless Chromium (non-blank
screenshot with the plots' colours, user strings shown as text, never run as markup).

The store is written by tests/report/make_report_fixture (the Store API), not by hand-written SQL."""
import csv
import html.parser
import io
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import numpy
import pytest

HOSTILE_MODEL = "resnet<script>document.title='pwned'</script>&co"


def run(cmd, timeout=60, **kwargs):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="session")
def tune(tune_binary):
    return tune_binary


@pytest.fixture(scope="session")
def make_fixture(build_dir):
    path = build_dir / "tests" / "report" / "make_report_fixture"
    if not path.exists():
        pytest.fail(f"{path} is not built")

    def make(db, *args):
        result = run([path, db, *args])
        assert result.returncode == 0, result.stderr
        return int(result.stdout.strip())

    return make


@pytest.fixture()
def store(tmp_path, make_fixture):
    db = tmp_path / "acspeed.db"
    make_fixture(db, "--model", HOSTILE_MODEL)
    return db


def report(tune, db, *args, **kwargs):
    return run([tune, "--db", db, "report", *args], **kwargs)


def test_every_format_to_stdout(tune, store):
    outputs = {}
    for fmt in ("md", "json", "csv", "html"):
        result = report(tune, store, "--format", fmt)
        assert result.returncode == 0, result.stderr
        outputs[fmt] = result.stdout
    doc = json.loads(outputs["json"])
    assert doc["format"] == "acspeed-report" and doc["version"] == 1
    assert doc["session"]["model_name"] == HOSTILE_MODEL
    assert len(doc["trials"]) == 24
    assert doc["decision"]["config"]["algorithm"] == "reduce_scatter"
    rows = list(csv.DictReader(io.StringIO(outputs["csv"], newline="")))
    assert len(rows) == 24
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 1 and "\n" in failed[0]["error"] and '"killed"' in failed[0]["error"]
    assert failed[0]["step_p50_s"] == ""
    assert "## Decision" in outputs["md"] and "## Trials" in outputs["md"]
    assert outputs["html"].startswith("<!DOCTYPE html>")


def test_default_is_the_latest_session_and_instance_filters(tune, tmp_path, make_fixture):
    db = tmp_path / "two.db"
    first = make_fixture(db, "--instance", "type-a", "--model", "alpha")
    second = make_fixture(db, "--instance", "type-b", "--model", "beta")
    latest = json.loads(report(tune, db, "--format", "json").stdout)
    assert latest["session"]["id"] == second
    assert json.loads(report(tune, db, "--latest", "--format", "json").stdout)["session"]["id"] == second
    by_instance = json.loads(report(tune, db, "--instance", "type-a", "--format", "json").stdout)
    assert by_instance["session"]["id"] == first and by_instance["session"]["model_name"] == "alpha"
    assert json.loads(report(tune, db, "--session", first, "--format", "json").stdout)["session"]["id"] == first
    mismatch = report(tune, db, "--session", first, "--instance", "type-b")
    assert mismatch.returncode == 1 and "type-a" in mismatch.stderr
    unknown = report(tune, db, "--instance", "type-z")
    assert unknown.returncode == 1 and "type-z" in unknown.stderr


def test_output_file_is_not_overwritten_without_force(tune, store, tmp_path):
    out = tmp_path / "report.html"
    first = report(tune, store, "--format", "html", "-o", out)
    assert first.returncode == 0, first.stderr
    assert first.stdout == ""
    assert out.read_text().startswith("<!DOCTYPE html>")
    out.write_text("keep me")
    refused = report(tune, store, "--format", "md", "-o", out)
    assert refused.returncode == 2
    assert "--force" in refused.stderr and str(out) in refused.stderr
    assert out.read_text() == "keep me"
    forced = report(tune, store, "--format", "md", "-o", out, "--force")
    assert forced.returncode == 0, forced.stderr
    assert out.read_text().startswith("# acspeed tuning report")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("report")) == ["report.html"]


@pytest.mark.parametrize("args, names", [
    (["--format", "pdf"], ["'pdf'", "md, json, csv, html"]),
    (["--session", "abc"], ["abc", "--session"]),
    (["--session", "0"], ["--session 0", "positive"]),
    (["--session", "1", "--latest"], ["--session", "--latest"]),
    (["--bogus"], ["--bogus"]),
])
def test_bad_values_exit_2_with_a_one_line_reason(tune, store, args, names):
    result = report(tune, store, *args)
    assert result.returncode == 2, result
    first_line = result.stderr.splitlines()[0]
    for name in names:
        assert name in first_line, result.stderr
    assert result.stdout == ""


def test_no_session_exits_1_with_a_clear_message(tune, store, tmp_path):
    missing = report(tune, store, "--session", "99")
    assert missing.returncode == 1
    assert "no tuning session 99" in missing.stderr and str(store) in missing.stderr
    empty = report(tune, tmp_path / "none.db")
    assert empty.returncode == 1
    assert "no tuning session" in empty.stderr and "does not exist yet" in empty.stderr
    assert not (tmp_path / "none.db").exists(), "reading must not create a store"


def test_read_only_store_is_reported(tune, store):
    """The store's file and folder are read-only for the reading user (root ignores modes, so as root
    the command runs as `nobody` through setpriv)."""
    as_root = os.geteuid() == 0
    setpriv = shutil.which("setpriv")
    if as_root and not setpriv:
        pytest.skip("running as root without setpriv: cannot drop to a user the file modes apply to")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="acspeed-ro-"))
    try:
        db = folder / "acspeed.db"
        shutil.copy(store, db)
        db.chmod(0o444)
        folder.chmod(0o555)
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"] if as_root else []
        result = run(prefix + [tune, "--db", db, "report", "--format", "json"])
        assert result.returncode == 0, result.stderr
        assert "read-only" in result.stderr
        assert json.loads(result.stdout)["session"]["model_name"] == HOSTILE_MODEL
        assert sorted(p.name for p in folder.iterdir()) == ["acspeed.db"]
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def test_an_online_session_shows_its_kind_and_its_windows_in_every_command_and_format(tune, tmp_path, make_fixture):
    """An offline decision is active; a later online session of the same key stores its decision
    inactive: `configs list` shows it with its kind, `explain` names both kinds and how to activate
    it, `sessions` and every report format say the kind, and the report carries the windows."""
    db = tmp_path / "acspeed.db"
    offline = make_fixture(db)
    online = make_fixture(db, "--online")
    listed = run([tune, "--db", db, "configs", "list"])
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:3] == ["ID", "ACTIVE", "KIND"], lines[0]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["1"][1:3] == ["*", "offline"] and rows["2"][1] == "online", lines  # 2: inactive (no *)
    kinds = {d["id"]: (d["kind"], d["active"]) for d in
             json.loads(run([tune, "--db", db, "configs", "list", "--json"]).stdout)["decisions"]}
    assert kinds == {1: ("offline", True), 2: ("online", False)}
    sessions = {s["id"]: s["kind"] for s in json.loads(run([tune, "--db", db, "sessions", "--json"]).stdout)["sessions"]}
    assert sessions == {offline: "offline", online: "online"}

    explain = [tune, "--db", db, "explain", "--model-signature", "sig-3f2a9c", "--world-size", "2", "--precision",
               "fp32", "--instance-type", "ecs.g7.2xlarge/8c-xeon"]
    before = run(explain)
    assert f"decision #1: kind offline (acspeed-tune session {offline})" in before.stdout, before.stdout
    assert "inactive online decision #2 for this key" in before.stdout and "configs activate 2" in before.stdout
    assert run([tune, "--db", db, "configs", "activate", "2"]).returncode == 0
    after = run(explain)
    assert f"decision #2: kind online (tuned inside a training job, online session {online})" in after.stdout, \
        after.stdout
    assert "inactive online decision" not in after.stdout

    outputs = {fmt: report(tune, db, "--session", online, "--format", fmt).stdout for fmt in ("md", "json", "csv", "html")}
    doc = json.loads(outputs["json"])
    assert doc["session"]["kind"] == "online" and doc["online"]["warmup_steps"] == 10
    windows = [t["window"] for t in doc["trials"]]
    assert windows[0]["first_step"] == 10 and doc["online"]["decision_from_step"] > windows[-1]["last_step"]
    assert all(b["first_step"] == a["last_step"] + 1 for a, b in zip(windows, windows[1:])), windows
    rows = list(csv.DictReader(io.StringIO(outputs["csv"], newline="")))
    assert [(r["session_kind"], int(r["window_first_step"]), int(r["window_last_step"])) for r in rows] == \
        [("online", w["first_step"], w["last_step"]) for w in windows]
    assert "| Kind | online (tuned inside the training job) |" in outputs["md"]
    assert f"\n| 0 | 10 | {windows[0]['last_step']} |" in outputs["md"]
    assert "Online windows over the job&#39;s steps" in outputs["html"]
    assert "| Kind | offline (acspeed-tune) |" in report(tune, db, "--session", offline).stdout


class DomText(html.parser.HTMLParser):
    """Text nodes and start tags of a serialised DOM."""

    def __init__(self):
        super().__init__()
        self.text = []
        self.tags = []
        self.title = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)
        if self.tags and self.tags[-1] == "title" and not self.title:
            self.title = data


@pytest.fixture(scope="session")
def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless Chromium installed (Debian: apt-get install chromium)")


def chromium_args(chromium, profile):
    # --no-sandbox: Chromium refuses to run as root with its sandbox (CI runs as root).
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={profile}"]


def test_html_renders_in_headless_chromium(tune, store, tmp_path, chromium):
    from PIL import Image

    page = tmp_path / "report.html"
    assert report(tune, store, "--format", "html", "-o", page).returncode == 0
    assert "<script" not in page.read_text().lower()

    shot = tmp_path / "shot.png"
    result = run(chromium_args(chromium, tmp_path / "profile") +
                 [f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri()], timeout=180)
    assert shot.exists(), result.stderr[-2000:]
    pixels = numpy.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert pixels.shape == (2000, 1200, 3)
    non_white = int((pixels.min(axis=2) < 240).sum())
    assert non_white > 0.03 * 2000 * 1200, f"page looks blank: {non_white} non-white pixels"

    def near(colour, tolerance=40):
        return int((abs(pixels - numpy.array(colour)) <= tolerance).all(axis=2).sum())

    # The plots were drawn: the exposed-communication bars (#D55E00) and the series / compute blue
    # (#0072B2) cover visible areas of the first 2000 pixels.
    assert near((0xD5, 0x5E, 0x00)) > 500
    assert near((0x00, 0x72, 0xB2)) > 500

    dom = run(chromium_args(chromium, tmp_path / "profile") + ["--dump-dom", page.as_uri()], timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = DomText()
    parsed.feed(dom.stdout)
    assert "script" not in parsed.tags
    assert parsed.tags.count("svg") == 3
    text = "".join(parsed.text)
    assert HOSTILE_MODEL in text
    # Had the model name run as a script, it would have replaced the document's title.
    assert parsed.title.startswith("acspeed tuning report: session 1 (resnet<script>"), parsed.title


def rendered_width(chromium, page, tmp_path, window=1280):
    """document.documentElement.scrollWidth of `page` laid out by headless Chromium in a window
    `window` px wide: a copy of the page without its Content-Security-Policy (which forbids scripts)
    and with one script that writes the width into the title, read back from the rendered DOM."""
    text = page.read_text()
    policy = text.index('<meta http-equiv="Content-Security-Policy"')
    text = text[:policy] + text[text.index(">", policy) + 1:]
    probe = tmp_path / f"width-{page.stem}.html"
    probe.write_text(text.replace("</body>", "<script>document.title = 'width=' + "
                                              "document.documentElement.scrollWidth;</script></body>"))
    dom = run(chromium_args(chromium, tmp_path / "profile") +
              [f"--window-size={window},1000", "--dump-dom", probe.as_uri()], timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = DomText()
    parsed.feed(dom.stdout)
    assert parsed.title.startswith("width="), parsed.title
    return int(parsed.title[len("width="):])


def test_html_fits_a_1280_pixel_window_without_scrolling_sideways(tune, store, tmp_path, chromium):
    page = tmp_path / "report.html"
    assert report(tune, store, "--format", "html", "-o", page).returncode == 0
    assert rendered_width(chromium, page, tmp_path) <= 1280
    # The probe measures: in a window narrower than the trials table's narrowest layout the page
    # scrolls sideways.
    assert rendered_width(chromium, page, tmp_path, window=300) > 300


@pytest.mark.slow
def test_report_of_a_real_tuning_session(tune, tmp_path, tuned_store, chromium):
    """acspeed-tune tuned a tiny model on 2 CPU processes (tests/tuner/tiny_models.py; the session
    tests/conftest.py's tuned_store shares) and the report reads what the tuner really stored."""
    db = tuned_store.db
    assert tuned_store.tuned.returncode == 0

    doc = json.loads(report(tune, db, "--format", "json").stdout)
    assert doc["session"]["model_name"] == "tiny_models:mlp" and doc["session"]["status"] == "done"
    search = [t for t in doc["trials"] if t["role"] == "search"]
    assert len(search) == 4 and all(t["status"] == "ok" for t in search)
    for t in search:
        assert len(t["step_times_s"]) == 4
        # Our percentiles from the raw times agree with the tuner's own metrics.
        assert t["step_time_s"]["p50"] == pytest.approx(t["metrics"]["p50_s"], rel=1e-9)
        assert t["samples_per_s_per_device"] == pytest.approx(t["metrics"]["samples_per_s"], rel=1e-9)
    assert doc["decision"] is not None and doc["decision"]["active"]
    assert doc["baseline"] is not None
    candidates = [t for t in doc["trials"] if t["role"] == "candidate"]
    assert len(doc["decision"]["repeats"]) == len(candidates)

    rows = list(csv.DictReader(io.StringIO(report(tune, db, "--format", "csv").stdout, newline="")))
    assert len(rows) == len(doc["trials"])
    page = tmp_path / "real.html"
    assert report(tune, db, "--format", "html", "-o", page).returncode == 0
    dom = run(chromium_args(chromium, tmp_path / "profile") + ["--dump-dom", page.as_uri()], timeout=180)
    parsed = DomText()
    parsed.feed(dom.stdout)
    assert parsed.tags.count("svg") == 3 and "tiny_models:mlp" in "".join(parsed.text)
    assert rendered_width(chromium, page, tmp_path) <= 1280
