from gapscope.cli import run

run()
