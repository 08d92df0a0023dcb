import logging
import os
import sys

from beam_pipeline import workers

EARLY_FORKSERVER = (workers.runs_in_process(sys.argv[1:]) and sys.argv[1:2] != ['inspect']
                    and not {'-h', '--help'} & set(sys.argv))
if EARLY_FORKSERVER:
  # Before this process imports Beam: the workers' forkserver imports TensorFlow meanwhile.
  workers.start_forkserver()

from beam_pipeline.cli import main  # pylint: disable=wrong-import-position

if __name__ == '__main__':
  code = main()
  if code == 2 and EARLY_FORKSERVER:  # a bad option: no run, no workers
    workers.stop_forkserver()
  # Everything the run wrote is closed and committed by now. Tearing down an
  # interpreter that holds Beam takes most of a second (measured: 2.1-2.8 s for a
  # script that only imports it, 1.4-1.6 s without the teardown) and does
  # nothing more, so the process ends here, once its output is flushed.
  logging.shutdown()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)
