import logging
import os
import sys
import time

STARTED = time.monotonic()  # before the imports below: the command's wall time includes them

from beam_pipeline import cli  # pylint: disable=wrong-import-position
from beam_pipeline.cli import arguments  # pylint: disable=wrong-import-position
from beam_pipeline.compat import multiprocessing_internals  # pylint: disable=wrong-import-position
from beam_pipeline.local import workers  # pylint: disable=wrong-import-position

if __name__ == '__main__':
  argv = sys.argv[1:]
  cli.quiet_libraries(arguments.command_of(argv))
  if arguments.command_of(argv) == 'convert' and workers.available():
    # Before Beam is imported: the workers' forkserver imports TensorFlow meanwhile.
    # The conversion stops it again if its options leave the pool unused.
    workers.start_forkserver()
  code = cli.main(argv, STARTED)
  # Everything the run wrote is closed and committed by now. Tearing down an
  # interpreter that holds Beam takes most of a second and does nothing more,
  # so the process ends here, once its output is flushed and the forkserver's
  # socket is removed.
  workers.shutdown()  # the pool the run released: there is no next run
  multiprocessing_internals.remove_forkserver_socket()
  workers.stop_forkserver(served_too=True)
  logging.shutdown()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)
