"""The rank-set overview screen and its command (``gapscope DIR``); the headless
summaries it shows are ``gapscope.ranks``."""
