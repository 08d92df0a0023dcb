"""Worker processes for the CPU-heavy steps of a run on this machine.

On the DirectRunner every DoFn runs in the launching process, and the steps
that cost CPU (decoding every image, encoding and writing shards, tracing the
tf.Transform graph) need TensorFlow, whose import alone takes longer than a
small run's images. Two things keep both cores busy from the start instead:

* A forkserver (multiprocessing's), started before this process imports Beam,
  imports TensorFlow and the worker-side modules once, in parallel with Beam's
  import and the graph's construction here, then forks ready workers. Beam's
  own multi-process mode starts each SDK worker from scratch (Beam's and
  TensorFlow's imports in each) only after the graph is built.
* The launching process never imports TensorFlow: DoFns hand the pool the
  steps of beam_pipeline.core.steps, which import their modules where they run,
  and get plain values back.

A run that ends well keeps its pool for the next run of the same process (the
API called again: a notebook, a test suite) for IDLE_SECONDS: its workers' first
TensorFlow calls, and the models they loaded, are paid once. A run with another
environment, directory or standard error, or one that failed, gets new workers.

Only steps whose files are all local use the pool. Cloud Storage reads are
latency-bound and run on the DoFn's own threads, and on Dataflow (or with
``--direct_running_mode=multi_processing``) each SDK worker process has its
core already: there the DoFns call the same functions inline.
"""
import atexit
import gc
import multiprocessing
import os
import select
import shutil
import signal
import tempfile
import threading
from concurrent.futures import Executor, ProcessPoolExecutor
from multiprocessing import forkserver
from typing import Any, Dict, List, Optional, Tuple

from beam_pipeline.compat import multiprocessing_internals
from beam_pipeline.core.images import kept_encodings

# What the forkserver imports before it forks: a watch on the launcher, TensorFlow, and the
# modules the steps run.
PRELOAD = ['beam_pipeline.local.preload']
# The launcher's process id, in the forkserver's environment: the forkserver may outlive it
# before its preload begins, and its parent is then another process.
LAUNCHER = 'BEAM_PIPELINE_LAUNCHER_PID'
# glibc's malloc tunables, in the forkserver's environment and so every worker's (other C libraries
# ignore them; one the user set is kept). By default malloc gives the top of its heap back to the
# system as soon as it is free, by a threshold it moves as it goes: a batch's arrays of a few MB
# were given back and taken again by the next batch as fresh pages, page faults the kernel's time
# paid image by image (benchmarks/README.md, What the whole conversion costs). Fixed thresholds
# keep freed memory for the next batch, up to the trim threshold; an image's pixels past the mmap
# threshold (a 12 MP decode) are still mapped apart and given back when freed.
MALLOC_TUNABLES = {'MALLOC_MMAP_THRESHOLD_': str(32 * 2**20), 'MALLOC_TRIM_THRESHOLD_': str(64 * 2**20)}

# How long a pool a run released waits, idle, for the next run of this process.
IDLE_SECONDS = 60.0

_pool: Optional[ProcessPoolExecutor] = None
_count = 0
# What the pool's workers were started with (_started_with): a run that differs gets new ones.
_started: Optional[Tuple[Any, ...]] = None
# Ends a released pool once it has waited IDLE_SECONDS; None while a run holds the pool.
_idle_end: Optional[threading.Timer] = None
# Held by whatever starts, releases or ends the pool: a run's thread and the idle timer's.
_lock = threading.RLock()
# Whether this process's forkserver has forked a pool's workers (stop_forkserver keeps it then).
_served = False
# The workers' temporary directory, removed with the pool (_initialize_worker).
_scratch: Optional[str] = None
# Set once the pool's first worker is forked (_fork_first): a task handed to the pool before
# then would hold its caller until the forkserver's imports end.
_forked = threading.Event()
_forked.set()
KEPT_ENCODINGS = 'kept-encodings'  # in the pool's scratch directory (core/images/kept_encodings.py)


def available() -> bool:
  """Whether this platform can run the pool (Windows has no forkserver)."""
  return 'forkserver' in multiprocessing.get_all_start_methods()


def start_forkserver() -> None:
  """Starts importing the worker-side modules in a forkserver, and returns at once.

  Called as early as possible; the first worker fork waits for the imports to end.
  The forkserver's standard error is /dev/null: TensorFlow's start-up log is
  noise, printed even when a bad option ends the command first. Each worker gets
  the launcher's standard error back (_LaunchersStderr).
  """
  forkserver.set_forkserver_preload(PRELOAD)
  stderr, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  added = {LAUNCHER: str(os.getpid()),
           **{name: value for name, value in MALLOC_TUNABLES.items() if name not in os.environ}}
  os.environ.update(added)
  try:
    os.dup2(devnull, 2)
    multiprocessing_internals.start_forkserver()  # now, with these file descriptors and environment
  finally:
    for name in added:
      del os.environ[name]
    os.dup2(stderr, 2)
    os.close(stderr)
    os.close(devnull)


def stop_forkserver(served_too: bool = False) -> None:
  """Ends a forkserver started for a run that will not use it (a bad option, another
  runner): it would go on importing TensorFlow after the command has returned. One that
  has served a pool (an earlier run of this process: the API called again) is done importing
  and waits idle: it stays, ready for the next run, unless ``served_too`` (the command is
  ending). Left to notice its parent's end, it would tear down an interpreter that holds
  TensorFlow, most of a second of CPU, holding the command's standard output open
  meanwhile: a reader of the output (a pipe, Airflow's log) would wait for it."""
  pid = multiprocessing_internals.forkserver_pid()
  if pid and (served_too or not _served):
    try:
      os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
      pass


def start(workers: int = 0) -> ProcessPoolExecutor:
  """The process pool the DoFns of this process use, with ``workers`` processes (default: one
  per core): the pool an earlier run released, if it was started as this one would be."""
  global _pool, _count, _scratch, _served, _started
  with _lock:
    _cancel_idle_end()
    cores = _usable_cores()
    count = workers or len(cores)
    started = _started_with(count)
    if _pool is not None and started != _started:
      shutdown()
    if _pool is None:
      start_forkserver()
      context = multiprocessing_internals.forkserver_context()
      _count = count
      assignments = context.SimpleQueue()
      for index in range(_count):
        assignments.put(cores[index % len(cores)])
      _scratch = _scratch or tempfile.mkdtemp(prefix='beam-pipeline-workers-')
      _pool = ProcessPoolExecutor(_count, mp_context=context, initializer=_initialize_worker,
                                  initargs=(os.getpid(), {**os.environ, 'TMPDIR': _scratch}, os.getcwd(), assignments,
                                            multiprocessing_internals.PassedFd(2)))
      _served, _started = True, started
      _fork_first(_pool)
    return _pool


def forked() -> bool:
  """Whether a task handed to the pool now goes to a worker without waiting for the first one to fork."""
  return _forked.is_set()


def _fork_first(pool: ProcessPoolExecutor) -> None:
  """Forks the pool's first worker on a thread of its own. The fork waits for the forkserver's
  imports (TensorFlow's, most of a local run's start-up), and the pool forks a worker on the
  thread that hands it a task: the launcher's own, which can list the input meanwhile
  (pooled_steps._PooledDoFn holds its tasks until forked())."""
  global _forked
  done = _forked = threading.Event()

  def fork() -> None:
    try:
      pool.submit(os.getpid)
    except Exception:  # pylint: disable=broad-except  # a pool ended or broken meanwhile: its next task says so
      pass
    finally:
      done.set()

  threading.Thread(target=fork, name='fork-first-worker', daemon=True).start()


def release() -> None:
  """Keeps the pool of a run that ended well for the next run of this process, for IDLE_SECONDS;
  shutdown() then, or at the interpreter's exit."""
  global _idle_end
  with _lock:
    if _pool is None:
      return
    _cancel_idle_end()
    _idle_end = threading.Timer(IDLE_SECONDS, _end_if_idle)
    _idle_end.daemon = True
    _idle_end.start()


def pool() -> Optional[Executor]:
  """The pool started in this process, or None (an SDK worker process, Dataflow, a test pipeline)."""
  return _pool


def replace(broken: Executor) -> Executor:
  """A new pool in place of ``broken``, whose worker process died (the system killed it, for
  memory perhaps): its other workers are gone too, and its tasks failed with
  BrokenProcessPool. The forkserver forks the new workers, ready at once. Replaced once,
  however many tasks report it."""
  global _pool
  with _lock:
    if _pool is broken:
      _pool.shutdown(wait=False, cancel_futures=True)
      _pool = None
      start(_count)
    return _pool


def count() -> int:
  """How many worker processes the pool has."""
  return _count


def shutdown() -> None:
  """Ends the pool's workers and removes their temporary directory."""
  global _pool, _scratch, _started
  with _lock:
    _cancel_idle_end()
    if _pool is not None:
      _pool.shutdown(wait=True, cancel_futures=True)
      _pool, _started = None, None
      shutil.rmtree(_scratch, ignore_errors=True)
      _scratch = None


atexit.register(shutdown)


def _started_with(count: int) -> Tuple[Any, ...]:
  """What a pool's ``count`` workers take from this process when they start: their number, the
  environment, the directory, and the file standard error is (a test's capture, a log)."""
  stderr = os.fstat(2)
  return count, tuple(sorted(os.environ.items())), os.getcwd(), (stderr.st_dev, stderr.st_ino)


def _cancel_idle_end() -> None:
  global _idle_end
  if _idle_end is not None:
    _idle_end.cancel()
    _idle_end = None


def _end_if_idle() -> None:
  """The idle timer's end: the pool goes unless a run took it back meanwhile (start() replaced
  or cancelled this timer)."""
  with _lock:
    if _idle_end is not None and _idle_end is threading.current_thread():
      shutdown()


def _usable_cores() -> List[int]:
  if hasattr(os, 'sched_getaffinity'):
    return sorted(os.sched_getaffinity(0))
  return list(range(os.cpu_count() or 1))


def _initialize_worker(launcher: int, environment: Dict[str, str], cwd: str, cores: Any, stderr: Any) -> None:
  """Runs in each worker: the launching process's environment and directory (the
  forkserver has those of its own start), a core of its own, and an end when the
  launcher ends.

  Its temporary directory (TMPDIR in ``environment``) is the pool's own, removed
  with the pool: a worker ends without the interpreter's exit, so what libraries
  would delete then (TensorFlow's autograph writes a source file for the graph's
  SavedModel signature) would otherwise stay behind.

  On a core of its own, a worker's TensorFlow threads (sized to the cores it
  sees) no longer contend with the other workers': validation is faster and
  takes less CPU (benchmarks/README.md).

  A killed launcher closes no pipe a worker would notice: every worker holds the
  write end of its own task queue, and the forkserver lives while any worker
  does. So each worker watches the launcher itself, and exits with it.

  Args:
    launcher: the launching process's id: the worker exits when it ends (end_with).
    environment: the launcher's environment, with TMPDIR the pool's temporary directory.
    cwd: the launcher's working directory, which relative paths are read against.
    cores: a queue of the cores to run on, one per worker, which the worker takes its own from.
    stderr: the launcher's standard error (multiprocessing_internals.PassedFd), which becomes the worker's, so
      that what workers print goes where the launcher's does (a test's capture, a log).
  """
  # Ctrl-C reaches every process of the terminal's group; the launcher alone decides what it
  # stops (cli/interrupts.py), and a worker it interrupted would report a failed task.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  stderr_fd = stderr.detach()  # the launcher's standard error (PassedFd)
  os.dup2(stderr_fd, 2)
  os.close(stderr_fd)
  os.environ.clear()
  os.environ.update(environment)
  tempfile.tempdir = None  # read from TMPDIR again at its next use
  os.chdir(cwd)
  # TensorFlow's modules, imported by the forkserver, live as long as the worker:
  # each full collection would rescan them.
  gc.freeze()
  # The workers share this machine's disk: what validation re-encodes, the writer need not make again.
  kept_encodings.enable(os.path.join(environment['TMPDIR'], KEPT_ENCODINGS))
  core = cores.get()
  try:
    os.sched_setaffinity(0, {core})
  except (AttributeError, OSError):  # not Linux, or the core was taken away meanwhile
    pass
  end_with(launcher, environment['TMPDIR'])


def end_with(pid: int, scratch: Optional[str] = None) -> None:
  """Ends this process as soon as process ``pid`` has ended (at once if it already has),
  from a daemon thread that waits on a pidfd: a SIGKILLed launcher runs no code to
  end its workers or its forkserver. A worker removes the pool's ``scratch`` directory
  first: a launcher that was killed, or that ended with os._exit while its pool waited
  idle for another run (Airflow's task processes do), left it. Not on Linux: nothing is
  watched, and workers end with the pool's shutdown only."""
  try:
    pid_fd = os.pidfd_open(pid)
  except ProcessLookupError:
    os._exit(1)
  except (AttributeError, OSError):
    return
  threading.Thread(target=_exit_with, args=(pid_fd, scratch), name='exit-with-launcher', daemon=True).start()


def _exit_with(pid_fd: int, scratch: Optional[str]) -> None:
  select.select([pid_fd], [], [])  # a pidfd turns readable when its process ends
  if scratch:
    shutil.rmtree(scratch, ignore_errors=True)
  os._exit(1)
