"""Argument types shared by the subcommands and benchmarks, and lazily loaded subcommands."""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Callable
from typing import Any, cast

from loaders.records import loads_line
from storage.codec import encode_id
from storage.errors import InvalidInput

#: The help of every command's STORE.
STORE_HELP = "the store: a directory (plain, or sharded by load --shards)"


def sizes(text: str) -> list[int]:
    """Comma-separated positive integers (benchmark sizes)."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("sizes must be positive integers")
    return values


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``low`` (a usage error, exit 2, else)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return value

    return parse


#: A positive integer; a non-negative one.
positive = at_least(1)
non_negative = at_least(0)


def port(text: str) -> int:
    """A TCP port, 0 (pick a free one) to 65535."""
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return value


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help, each option's default shown after its text (as
    ``ArgumentDefaultsHelpFormatter``), except a default that says nothing (None, False:
    an option that is off or has no value unless given) or one the text already names."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default is None or default is False or default is argparse.SUPPRESS:
            return text
        shown = ",".join(map(str, default)) if isinstance(default, list) else str(default)
        if "default" in text or f"({shown}" in text:  # named already: "(120)", "default 5"
            return text
        if not action.option_strings and action.nargs not in ("?", "*"):
            return text  # a required positional has no default
        return f"{text} (default: {shown.replace('%', '%%')})"


class LazyCommands(argparse._SubParsersAction):  # the `action` of add_subparsers
    """Subcommands whose module is imported, and whose options are added, only when the
    command line chooses them.

    ``bexdb match`` then imports no benchmark (nor numpy's or matplotlib's start-up cost),
    while ``bexdb --help`` still lists every command: a lazy command is declared with its
    name, its module's dotted path and a help line.  The module offers
    ``add_arguments(parser)`` and ``main(args) -> int``; ``main`` becomes the default of
    ``entry`` (``func`` unless told).  Cost: one import when the command is chosen.

        sub = LazyCommands.attach(parser, dest="command")
        sub.add_lazy("gen", "tools.bench.gen_cli", help="write a synthetic workload")
    """

    @classmethod
    def attach(cls, parser: argparse.ArgumentParser, **options: Any) -> LazyCommands:
        """``parser.add_subparsers(**options)`` with this action."""
        return cast(LazyCommands, parser.add_subparsers(action=cls, **options))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[str, tuple[argparse.ArgumentParser, str, str]] = {}

    def add_parser(self, name: str, **options: Any) -> argparse.ArgumentParser:
        """A subcommand's parser, its help shown with :class:`HelpFormatter`."""
        options.setdefault("formatter_class", HelpFormatter)
        return cast(argparse.ArgumentParser, super().add_parser(name, **options))

    def add_lazy(
        self, name: str, module: str, help: str, entry: str = "func"
    ) -> argparse.ArgumentParser:
        """Declare ``name``; its parser (for defaults set now) is returned."""
        parser: argparse.ArgumentParser = self.add_parser(name, help=help)
        self._pending[name] = (parser, module, entry)
        return parser

    def load(self, name: str) -> None:
        """Import ``name``'s module and add its options, once (a no-op for others)."""
        pending = self._pending.pop(name, None)
        if pending is not None:
            parser, module, entry = pending
            loaded = importlib.import_module(module)
            loaded.add_arguments(parser)
            parser.set_defaults(**{entry: loaded.main})

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        self.load(values[0])  # argparse hands the chosen name and the rest of the line
        super().__call__(parser, namespace, values, option_string)


#: a JSON integer's text (``007`` is none: such an id is the text itself)
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)", re.ASCII)


def parse_id(text: str) -> int | str:
    """A subscription id from the command line or a URL: a JSON integer or string, else
    the text itself.  An id no store can hold (a lone surrogate, an integer past 64 bits)
    raises :class:`InvalidInput`."""
    try:
        value = loads_line(text)
    except InvalidInput:
        if _INTEGER.fullmatch(text):  # a JSON integer past even Python's digit limit
            raise InvalidInput("integer id outside the signed 64-bit range") from None
        value = text
    if isinstance(value, bool) or not isinstance(value, int | str):
        value = text
    encode_id(value)  # validates it
    return value
