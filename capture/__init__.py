"""capture: record torch.profiler (Kineto) traces that gap analysis can read.

Stands alone: imports torch (lazily, inside functions) and nothing of the viewer, so
it runs on a bare GPU server; ``from gapscope import capture`` works without torch.

- ``Profiler(out_dir, schedule=None | Schedule(...), ...)``: context manager;
  ``step()`` per iteration; writes ``HOST_PID_TIME_LABEL.pt.trace.json.gz``.
- ``profiled``: decorator form of ``Profiler``.
- ``step()``: mark a step of whatever gapscope profiler is running (no-op otherwise);
  this is how a script run by ``gapscope capture -- python script.py`` marks steps.
- ``scenarios.run_scenario(name, out_dir)``: built-in workloads, one per smell.

See ``docs/gapscope.capture.md``.
"""

from gapscope.capture.profile import Profiler, Schedule, TorchMissing, active_profiler, profiled, require_torch, step

__all__ = ["Profiler", "Schedule", "profiled", "step", "active_profiler", "TorchMissing", "require_torch"]
