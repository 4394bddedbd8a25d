"""Headless diagnosis of GPU idle gaps (no UI library is imported here).

``diagnose(trace, params) -> Diagnosis``: busy unions, idle gaps, cause class with
evidence per gap, picket-fence episodes, steps and recurring groups, budget, cards and
what-if. Definitions: "Definitions", "The card", "Budget and what-if" in the design.
"""

from .budget import Budget, WhatIf
from .diagnose import Diagnosis, diagnose
from .picket import PicketEpisode
from .steps import GapGroup, Steps
from .types import Card, Cause, DeviceSummary, Evidence, Gaps, Params

__all__ = [
    "diagnose", "Diagnosis", "Cause", "Params", "Card", "Evidence", "Gaps", "DeviceSummary",
    "PicketEpisode", "Steps", "GapGroup", "Budget", "WhatIf",
]
