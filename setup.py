"""The one C extension: the scanner of the events array (``parsers/chrome/_xscan.c``,
used by ``gapscope.parsers.chrome.fastscan``). Everything else is in pyproject.toml.
Optional: without a C compiler the build goes on, and msgspec decodes every part."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("gapscope.parsers.chrome._xscan", ["parsers/chrome/_xscan.c"], optional=True)])
