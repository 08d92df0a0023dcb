import logging
import os
import sys

from beam_pipeline import workers

if workers.runs_in_process(sys.argv[1:]) and sys.argv[1:2] != ['inspect']:
  # Before this process imports Beam: the workers' forkserver imports TensorFlow meanwhile.
  workers.start_forkserver()

from beam_pipeline.cli import main  # pylint: disable=wrong-import-position

if __name__ == '__main__':
  code = main()
  # Everything the run wrote is closed and committed by now. Tearing down an
  # interpreter that holds TensorFlow and Beam takes about a second (measured:
  # 4.6 s for a script that only imports both, 3.7 s without the teardown) and
  # does nothing more, so the process ends here, once its output is flushed.
  logging.shutdown()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)
