"""capture on a CUDA GPU: every scenario records GPU kernels (skipped without CUDA).

Runs only where ``torch.cuda.is_available()`` (a lent GPU machine; never in CI). The
smell check of the diagnosis is in ``bench/gpu_capture.sh``; this file checks that
the capture itself works on a GPU: CUDA activity on, kernels and launch calls in the
trace, linked by correlation, inside the recorded steps.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.test_capture import check_trace, range_counts


def _cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


pytestmark = pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)")

SCENARIOS = ["decode", "decode-graph", "decode-eager", "picket-fence", "host-island", "copy-on-path", "sync-cliff"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_records_gpu_kernels(tmp_path, name):
    from gapscope.capture.scenarios import run_scenario

    prof = run_scenario(name, str(tmp_path), tiny=True, log=lambda m: None)
    assert prof.cuda is True and len(prof.traces) == 1
    doc = check_trace(prof.traces[0])
    assert doc["gapscope_capture"]["cuda"] is True
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels, "no GPU kernels recorded"
    runtime = range_counts(doc, "cuda_runtime") + range_counts(doc, "cuda_driver")
    launched = {
        e["args"].get("correlation")
        for e in doc["traceEvents"]
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "args" in e
    }
    assert sum(1 for k in kernels if k["args"].get("correlation") in launched) >= len(kernels) // 2
    if name == "decode-graph":
        assert runtime["cudaGraphLaunch"] >= 4  # one replay per decoded token
    if name == "copy-on-path":
        assert [e for e in doc["traceEvents"] if e.get("cat") == "gpu_memcpy"], "no GPU copies recorded"
