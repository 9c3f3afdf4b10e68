"""``bexdb --version`` and ``--help``: every command, positional and option explained.

The walk loads every lazily declared command (gen, demo, the benchmarks) as choosing it on
the command line would, so that a new option without help text fails here.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version

from storage.store import FORMAT_VERSION
from tools.args import LazyCommands
from tools.cli import build_parser


def commands(
    parser: argparse.ArgumentParser, name: str = "bexdb"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser under ``parser`` (itself included), with its command line."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if isinstance(action, LazyCommands):
                for lazy in list(action.choices):
                    action.load(lazy)
            for sub, subparser in action.choices.items():
                yield from commands(subparser, f"{name} {sub}")


def bexdb(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", *argv], capture_output=True, text=True, timeout=120
    )


def test_every_positional_and_option_has_help() -> None:
    missing = []
    seen = 0
    for name, parser in commands(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            seen += 1
            if not (action.help or "").strip():
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []
    assert seen > 100  # the walk reached the lazy commands' options too


def test_help_shows_defaults_and_the_record_format() -> None:
    shown = bexdb("load", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())  # argparse wraps lines
    assert "(default: spark)" in text and "store the store to build" in text
    text = " ".join(bexdb("serve", "--help").stdout.split())
    assert "(default: 16)" in text and "(default: 8765)" not in text  # "(8765; ...)" named it
    text = " ".join(bexdb("subscribe", "--help").stdout.split())
    assert '{"id": ID, "expr": "EXPRESSION"}' in text
    text = " ".join(bexdb("adjust", "--help").stdout.split())
    assert "--on turn self-adjustment on" in text and "--off turn it off" in text
    text = " ".join(bexdb("inspect", "--help").stdout.split())
    assert "--json print the figures as one JSON document" in text


def test_version() -> None:
    shown = bexdb("--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"bexdb {version('bexdb')} (store format {FORMAT_VERSION})\n"
