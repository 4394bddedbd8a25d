"""The C extensions: the scanner of the events array (``parsers/chrome/_xscan.c``, used
by ``gapscope.parsers.chrome.fastscan``) and the transcoder of Perfetto TrackEvent
packets (``parsers/perfetto/_pfscan.c``, used by ``gapscope.parsers.perfetto.loader``).
Everything else is in pyproject.toml. Optional: without a C compiler the build goes on,
msgspec decodes every part and the generated protobuf classes every packet."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("gapscope.parsers.chrome._xscan", ["parsers/chrome/_xscan.c"], optional=True),
        Extension("gapscope.parsers.perfetto._pfscan", ["parsers/perfetto/_pfscan.c"], optional=True),
    ]
)
