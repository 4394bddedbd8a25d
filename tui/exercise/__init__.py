"""The exercise mode's screens and its command (``gapscope exercise``); the headless
engine they drive is ``gapscope.exercise``."""
