"""``gapscope diff BEFORE AFTER``: compare two diagnosed traces (protocol step 6,
"re-measure the same figure on a new capture and compare the two traces").

Modules: ``names`` (kernel names normalised for matching), ``side`` (steady steps,
per-step figures, kernel families and idle positions of one trace), ``match``
(positions paired across the traces: died, shrank, grew, appeared, unchanged),
``document`` (the JSON document every format renders from, with the verdict and the
comparability check), ``text`` / ``markdown`` (renderers), ``cmd`` (the command).
Headless: nothing here imports Textual.
"""
