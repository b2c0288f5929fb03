#!/usr/bin/env python3
"""Where the test suite's time goes: sums the per-test times of a run, per file, from the JUnit XML
files scripts/test.sh writes (pytest's --junitxml, ctest's --output-junit), and prints them as
Markdown tables, slowest first (docs/testing.md holds one such table).

  scripts/test_times.py --pytest build/test-times/pytest.xml --ctest build/test-times/ctest.xml [--top N]

A pytest file's time is the sum of its tests' set-up, call and tear-down (a fixture shared by a module
or the session counts in the first test that uses it). A GoogleTest suite's time is the sum of its
tests, named by test program and suite (a suite is one fixture, mostly one *_test.cc file)."""
import argparse
import collections
import pathlib
import sys
import xml.etree.ElementTree as ElementTree


def _cases(path: pathlib.Path):
    """(name, classname, seconds, outcome) of every testcase in a JUnit XML file."""
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        yield case.get("name", ""), case.get("classname", ""), float(case.get("time") or 0), outcome


def pytest_file(classname: str) -> str:
    """pytest's classname `tests.tuner.test_tune` (or `...test_tune.TestClass`) -> tests/tuner/test_tune.py."""
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test_"):
        parts.pop()
    return "/".join(parts) + ".py" if parts else classname


def ctest_group(name: str) -> str:
    """A ctest name `SuiteName.TestName` (gtest_discover_tests) -> its suite; `fuzz_x_corpus` -> fuzz."""
    return name.split(".", 1)[0] if "." in name else name.split("_", 1)[0]


def table(title: str, groups: dict, top: int) -> str:
    """The `top` slowest groups, one row each, then one row for the rest."""
    total = sum(seconds for seconds, _ in groups.values())
    ranked = sorted(groups.items(), key=lambda item: -item[1][0])
    rows = [(f"`{name}`", seconds, count) for name, (seconds, count) in ranked[:top]]
    if ranked[top:]:
        rest = ranked[top:]
        rows.append((f"{len(rest)} others", sum(s for _, (s, _) in rest), sum(c for _, (_, c) in rest)))
    lines = [f"| {title} | tests | seconds | share |", "|---|---:|---:|---:|"]
    for name, seconds, count in rows:
        lines.append(f"| {name} | {count} | {seconds:.1f} | {100 * seconds / total if total else 0:.0f}% |")
    lines.append(f"| **total** | {sum(c for _, c in groups.values())} | {total:.1f} | |")
    return "\n".join(lines)


def summarise(path: pathlib.Path, key) -> tuple:
    groups = collections.defaultdict(lambda: [0.0, 0])
    outcomes = collections.Counter()
    for name, classname, seconds, outcome in _cases(path):
        group = groups[key(name, classname)]
        group[0] += seconds
        group[1] += 1
        outcomes[outcome] += 1
    return {name: tuple(value) for name, value in groups.items()}, outcomes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pytest", type=pathlib.Path, help="pytest's --junitxml file")
    parser.add_argument("--ctest", type=pathlib.Path, help="ctest's --output-junit file")
    parser.add_argument("--top", type=int, default=1000, help="rows per table; the rest are summed in one")
    args = parser.parse_args(argv)
    if not args.pytest and not args.ctest:
        parser.error("name --pytest FILE, --ctest FILE or both")
    for label, path, key in (("ctest (GoogleTest suites)", args.ctest, lambda name, _: ctest_group(name)),
                             ("pytest file", args.pytest, lambda _, classname: pytest_file(classname))):
        if path is None:
            continue
        if not path.is_file():
            print(f"test_times: {path} does not exist (scripts/test.sh writes it)", file=sys.stderr)
            return 1
        groups, outcomes = summarise(path, key)
        print(table(label, groups, args.top))
        print(f"\n{path.name}: " + ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items())) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
