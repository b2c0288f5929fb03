"""Every path of this repository that a comment or a document cites exists, written whole (from the
checkout's root, or relative to the citing file as a Markdown link is), and nothing cites a file
outside the repository (the design notes the project started from are not in it)."""
import pathlib
import re
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# Raw data and generated pages quote paths as they were when recorded; fixtures are test inputs.
SKIPPED_SUFFIXES = (".json", ".html", ".png", ".svg")
# A citation: folders, then a file name with a source or document extension. A token starting with one
# of the checkout's top-level folders (or ../) is a repository path; anything else (a package path such
# as acspeed/tuner/knobs.h in an #include, a URL's tail, an upstream file) is not checked here.
CITATION = re.compile(r"(?<![\w./-])((?:\.\./)*(?:[A-Za-z_][\w.-]*/)+[\w.-]+\.(?:py|cc|h|md|sh|sql|toml|txt|cmake))(?![\w/])")
OUTSIDE = re.compile(r"\b(?:DESIGN|STYLE|DEVELOPERS)\.md\b")


def _tracked_text_files():
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        if name.endswith(SKIPPED_SUFFIXES) or "/fixtures/" in name:
            continue
        path = REPO / name
        try:
            yield name, path.read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue


def _unresolved(name: str, text: str, tops: set) -> list:
    citing_folder = (REPO / name).parent
    missing = []
    for match in CITATION.finditer(text):
        cited = match.group(1)
        first = cited.split("/")[0]
        if first != ".." and first not in tops:
            continue
        if not ((REPO / cited).exists() or (citing_folder / cited).exists()):
            missing.append(cited)
    return missing


THIS = pathlib.Path(__file__).relative_to(REPO).as_posix()  # its own examples cite paths that do not exist


def test_every_cited_repository_path_exists():
    tops = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")}
    missing = {name: found for name, text in _tracked_text_files()
               if name != THIS and (found := _unresolved(name, text, tops))}
    assert not missing, f"cited paths that do not exist (write them whole, from the checkout's root): {missing}"


def test_nothing_cites_a_file_outside_the_repository():
    citing = {name: OUTSIDE.findall(text) for name, text in _tracked_text_files() if name != THIS}
    assert not {k: v for k, v in citing.items() if v}


@pytest.mark.parametrize("text, expected", [
    ("see tuner/src/session.cc for the loop", []),
    ("see tuner/session.cc for the loop", ["tuner/session.cc"]),
    ("#include \"acspeed/tuner/knobs.h\"", []),
    ("([knobs.h](../tuner/include/acspeed/tuner/knobs.h))", []),
])
def test_the_check_reads_citations_as_meant(text, expected):
    tops = {"tuner", "docs"}
    assert _unresolved("docs/architecture.md", text, tops) == expected
