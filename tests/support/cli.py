"""Driving ``tools.cli.main`` in-process, as the command-line tests do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.cli import main


def write_lines(path: Path, docs: list[Any]) -> str:
    """Write ``docs`` as JSON Lines (a ``str`` is written as it is); the path as text."""
    path.write_text("".join((d if isinstance(d, str) else json.dumps(d)) + "\n" for d in docs))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``bexdb ARGV...`` in this process: its exit code, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
