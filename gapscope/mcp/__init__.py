"""``gapscope mcp``: the diagnosis as Model Context Protocol tools for coding agents.

- ``cmd``: the command line (``gapscope mcp [--root DIR ...]``), stdio transport.
- ``server``: the tools on the ``mcp`` SDK (the only module importing it).
- ``service``: what each tool does: path checks, loading, the time limit.
- ``answers``: the answers as dicts, paged and bounded, from the report, diff and
  rank-set documents.
- ``roots``: which files may be read. ``store``: the loaded traces kept between calls.

Needs the ``mcp`` extra (``pip install 'gapscope[mcp]'``); nothing else of gapscope
imports this package. Documented in ``docs/mcp.md``.
"""
