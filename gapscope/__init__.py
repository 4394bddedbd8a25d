"""gapscope: find where the GPU sat idle in a profiler trace, and say why."""

__version__ = "0.1.0"
