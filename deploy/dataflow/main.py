"""The Flex Template's entry file: the launcher runs it with the template's parameters
as --name=value flags, beside Dataflow's own (--runner, --project, --region, ...).

It submits the job and returns at once (a launcher must not wait for the job);
beam_pipeline.json appears in the output when the job completes.
"""
import sys

from beam_pipeline import cli

if __name__ == '__main__':
  sys.exit(cli.main([*sys.argv[1:], '--no_wait']))
