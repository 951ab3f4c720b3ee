"""Generates the blocking modules of the Python SDK from their asyncio sources.

The SDK's API is written once, for asyncio: memplane/aio.py and memplane/_admin_aio.py (the
clients) and memplane/_aio_transport.py (the transport and client base). Each blocking module is the same
code with every asyncio construct rewritten by RULES below, in order, over the whole text.

Run with --check to fail (exit 1) when a committed blocking module differs from what would be
generated, which the unit tests do so that the two kinds of client never drift apart.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "clients" / "python" / "memplane"

#: asyncio source -> the blocking module generated from it, both in PACKAGE.
FILES = {"aio.py": "client.py", "_admin_aio.py": "_admin_sync.py", "_aio_transport.py": "_sync_transport.py"}

HEADER = (
    "# Generated from memplane/{source} by scripts/gen_sync_client.py: do not edit by hand.\n"
    "# Change {source} and run `make generate`.\n"
)

#: asyncio name -> blocking name, whole words, in code and prose alike.
NAMES = {
    "AsyncMemoryClient": "MemoryClient",
    "AsyncAdminClient": "AdminClient",
    "AsyncClientBase": "SyncClientBase",
    "AsyncTransport": "SyncTransport",
    "AsyncIterator": "Iterator",
    "AsyncSleep": "Sleep",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "asyncio.sleep": "time.sleep",
    "grpc.aio": "grpc",
    "_admin_aio": "_admin_sync",
}

#: (pattern, replacement), applied in this order with re.MULTILINE.
RULES: tuple[tuple[str, str], ...] = (
    # An async generator that only hands on another's items delegates to it (the loop's body is
    # that one yield: the next line is not indented deeper than the loop).
    (
        r"^(?P<i>[ \t]*)async for (?P<x>\w+) in (?P<items>.+):\n(?P=i)[ \t]+yield (?P=x)\n(?!(?P=i)[ \t])",
        r"\g<i>yield from \g<items>\n",
    ),
    # A grpc.aio unary call is awaited for its answer; a blocking one gives the answer together
    # with the call, for its trailing metadata, from with_call.
    (
        r"^(?P<i>[ \t]*)call = rpc\((?P<args>.*)\)\n(?P=i)response = await call\n",
        r"\g<i>response, call = rpc.with_call(\g<args>)\n",
    ),
    (r"\basync (def|for|with)\b", r"\1"),
    (r"\bawait ", ""),
    # The asyncio modules import asyncio for its sleep alone, whose blocking twin is time.sleep (NAMES).
    (r"^import asyncio$", "import time"),
    *((rf"\b{re.escape(old)}\b", new) for old, new in NAMES.items()),
    # Prose only: asyncio left anywhere else is code no rule rewrites, which sync_source refuses.
    (r"\basyncio (?=client|transport)", "blocking "),
    (r"\bAsyncio (?=client|transport)", "Blocking "),
)

#: What no blocking module may still hold: a rule is missing for it.
ASYNC_LEFTOVERS = re.compile(
    r"\basync (def|for|with)\b|\bawait\b|\basyncio\b|\bgrpc\.aio\b|\bAsync[A-Z]\w*|\b__a(enter|exit|iter|next)__\b"
)


def sync_source(source: str, text: str) -> str:
    """The blocking module generated from the asyncio module source (its file name) holding text.

    Raises:
        ValueError: The result still holds an asyncio construct that no rule rewrites.
    """
    for pattern, replacement in RULES:
        text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    leftovers = sorted({m.group() for m in ASYNC_LEFTOVERS.finditer(text)})
    if leftovers:
        raise ValueError(f"{source}: no rule in scripts/gen_sync_client.py rewrites {', '.join(leftovers)}")
    return sorted_imports(PACKAGE / FILES[source], HEADER.format(source=source) + text)


def sorted_imports(path: Path, text: str) -> str:
    """The text with its imports in the project's order (ruff's isort, as the lint gate checks it):
    renaming asyncio to time moves an import, and the gate holds generated modules to it too."""
    fixed = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "I", "--fix-only", "--exit-zero", "--quiet",
         "--stdin-filename", str(path), "-"],
        input=text, capture_output=True, text=True, check=True, cwd=ROOT,
    )
    return fixed.stdout


def stale(package: Path = PACKAGE) -> dict[Path, str]:
    """Each blocking module whose text is not what its asyncio source generates, with that text."""
    out = {}
    for source, target in FILES.items():
        fresh = sync_source(source, (package / source).read_text())
        path = package / target
        if not path.exists() or path.read_text() != fresh:
            out[path] = fresh
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if a committed blocking module is stale")
    args = parser.parse_args()
    changed = stale()
    if args.check:
        if changed:
            names = ", ".join(path.name for path in changed)
            print(f"generated code is stale; run scripts/gen_sync_client.py: {names}", file=sys.stderr)
            return 1
        return 0
    for path, text in changed.items():
        path.write_text(text)
    print(f"generated {len(FILES)} files, {len(changed)} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
