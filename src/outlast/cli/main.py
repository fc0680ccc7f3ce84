"""``outlast`` entry point. ``serve``'s flags come from ``outlast.config.Settings``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from pydantic import ValidationError

from outlast.cli import options


class OneLineParser(argparse.ArgumentParser):
    """A usage mistake is one line on stderr and exit status 2 (spec §6), not the
    whole usage block: ``outlast serve`` has dozens of flags."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _add_serve(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    p = sub.add_parser(
        "serve", help="run the service (embedded SQLite store by default)",
        description="Run the service. Every flag also reads the OUTLAST_* variable its help "
                    "names; a flag wins over its variable.")
    options.add_arguments(p)


def build_parser() -> argparse.ArgumentParser:
    """The ``outlast`` parser: ``serve`` and the client commands."""
    from outlast.cli import client

    parser = OneLineParser(prog="outlast", description="Durable AG-UI agent runs.")
    parser.add_argument("--version", action="version", version=client.version_text())
    client.add_connection_options(parser)
    # Not required: with no command, ``main`` lists them all (as ``git`` does).
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    _add_serve(sub)
    client.add_commands(sub)
    from outlast.cli import gc

    gc.add_command(sub)
    from outlast.cli import check

    check.add_command(sub)
    return parser


def command_list(parser: argparse.ArgumentParser) -> str:
    """What ``outlast`` alone prints: every command on one line, as ``git`` does."""
    commands = next(a for a in parser._actions
                    if isinstance(a, argparse._SubParsersAction))
    helps = [(c.dest, c.help or "") for c in commands._choices_actions]
    width = max(len(name) for name, _ in helps)
    lines = [f"   {name.ljust(width)}   {text[:1].lower()}{text[1:]}" for name, text in helps]
    return (f"usage: {parser.prog} [--url URL] [--token TOKEN] [--json] COMMAND [ARGS]\n\n"
            "commands:\n" + "\n".join(lines) +
            f"\n\n'{parser.prog} COMMAND --help' shows a command's options and an example.\n")


def main(argv: Sequence[str] | None = None) -> None:
    """Console script entry point."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.command is None:
        print(command_list(parser), end="")
        raise SystemExit(2)
    from outlast.cli import client

    problem = client.resolve_connection(ns)
    if problem:
        parser.error(problem)
    if ns.command == "serve":
        from outlast.cli.serve import serve

        try:
            settings = options.settings_from(ns)
        except ValidationError as exc:
            print(f"outlast serve: {options.explain(exc)}", file=sys.stderr)
            raise SystemExit(2) from None
        serve(settings)
        return
    if ns.command == "gc":
        from outlast.cli import gc

        sys.exit(gc.run(ns))
    if ns.command == "check":
        from outlast.cli import check

        if problem := check.problem(ns):
            parser.error(problem)
        sys.exit(check.run(ns))
    problem = client.problem(ns)
    if problem:
        parser.error(problem)  # one line and exit status 2, like argparse's own
    sys.exit(client.run(ns))


if __name__ == "__main__":
    main()
