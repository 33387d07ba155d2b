"""Named exceptions. Each message is one line that names what is wrong and where."""

from __future__ import annotations


class RackwiseError(Exception):
    """Base of every error rackwise raises on purpose."""


class InputError(RackwiseError, ValueError):
    """Bad user input: a trace, a cluster spec, a config file or a flag.

    The message names the source (file, line, field) and what is wrong.
    """

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        where = []
        if source is not None:
            where.append(str(source) if line is None else f"{source}:{line}")
        elif line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.source = source
        self.line = line
        self.field = field


def parse_error(exc: Exception, source: str, what: str = "cannot parse") -> InputError:
    """A one-line `InputError` for a YAML or TOML file that does not parse, at its line when known."""
    mark = getattr(exc, "problem_mark", None)  # PyYAML says where the problem is
    line = mark.line + 1 if mark is not None else None
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return InputError(f"{what}: {problem}", source=source, line=line)


class UnknownNameError(RackwiseError, KeyError):
    """An unknown policy, placement, trace or other registered name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class InvalidDecisionError(RackwiseError):
    """A policy returned a decision the engine cannot apply."""


class MissingExtraError(RackwiseError, ImportError):
    """An optional dependency is needed; the message says which extra installs it."""


def suggest(name: str, known: list[str] | tuple[str, ...]) -> str:
    """' Did you mean X?' for a close match, else ''."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" Did you mean '{close[0]}'?" if close else ""
