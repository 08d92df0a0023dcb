"""The command line: ``python -m beam_pipeline`` parsed and checked, a conversion launched
and reported, its progress shown. Only launch.py and options.py import Beam, and only
for a conversion."""
from beam_pipeline.cli.commands import main, quiet_libraries  # noqa: F401
