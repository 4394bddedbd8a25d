"""Headless diagnosis of GPU idle gaps (no UI library is imported here).

``diagnose(trace, params) -> Diagnosis``: busy unions, idle gaps, cause class with
evidence per gap, picket-fence episodes, steps and recurring groups, budget, cards and
what-if. Definitions: "Definitions", "The card", "Budget and what-if" in the design.
"""

from gapscope.analysis.budget import Budget, WhatIf
from gapscope.analysis.diagnose import Diagnosis, diagnose
from gapscope.analysis.picket import PicketEpisode
from gapscope.analysis.steps import GapGroup, Steps
from gapscope.analysis.types import Card, Cause, DeviceSummary, Evidence, Gaps, Params

__all__ = [
    "diagnose",
    "Diagnosis",
    "Cause",
    "Params",
    "Card",
    "Evidence",
    "Gaps",
    "DeviceSummary",
    "PicketEpisode",
    "Steps",
    "GapGroup",
    "Budget",
    "WhatIf",
]
