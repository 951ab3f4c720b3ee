"""The tools' optional dependencies, the distribution's extras: a tool run without its extra ends in
one line naming the pip command that installs it, and exit status 2, not a traceback."""
from __future__ import annotations

import sys

# The top-level modules each extra installs (clients/python/pyproject.toml; a test holds them together).
EXTRA_MODULES = {
    "mcp": frozenset({"mcp"}),
    "panel": frozenset({"starlette", "jinja2", "python_multipart", "sse_starlette", "uvicorn"}),
}


def missing_extra(exc: ModuleNotFoundError, extra: str, prog: str) -> int:
    """Called with the import error of a tool's module: 2 after the hint when one of the extra's
    modules is what is missing; any other missing module is a fault of its own, raised again."""
    if (exc.name or "").partition(".")[0] not in EXTRA_MODULES[extra]:
        raise exc
    print(f"{prog} needs the {extra!r} extra (missing {exc.name}): pip install 'memplane-client[{extra}]'",
          file=sys.stderr)
    return 2
