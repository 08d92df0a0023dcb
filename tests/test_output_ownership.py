"""An output is ours only when we wrote it, one run at a time writes it, and Ctrl-C or a full disk
never leaves it half done or blamed on us.

Each case runs the real command: in this process, or in a process of its own held at an
exact point of its work (helpers/at_point.py), so that a second run meets the first
while it works, whatever the machine's speed.
"""
import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, Tuple

import pytest

from beam_pipeline import cli
from beam_pipeline.cli import failures
from beam_pipeline.pipeline.listing import local_files
from helpers import gcs_emulator
from helpers.commands import ROOT, command, error_line, started, user_environment
from helpers.dataset_reader import read_output
from helpers.photos import labelled, write_files
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.rejections import LockLost

AT_POINT = ROOT / 'tests' / 'helpers' / 'at_point.py'
# --overwrite: these runs replace one set's output with the other's on purpose, to show what the lock
# and the commit do (tests/test_first_hour.py shows that another input needs it).
RUN_ARGS = ('--runner=DirectRunner', '--skip_transform', '--overwrite')
MARKER = output_layout.RUN_RECORD
BUCKET = 'ownership'
# Photos a class. A run is held at exact points of its work, whatever its size: only the full disk
# needs a size, which run A's shards (about 110 KiB) overflow.
PER_CLASS = 30


@pytest.fixture(scope='module')
def sets(tmp_path_factory) -> Tuple[Path, Path]:
  """Run A's photos (cat, dog) and run B's (bird, cow, fish)."""
  root = tmp_path_factory.mktemp('ownership')
  write_files(root / 'a', labelled(('cat', 'dog'), PER_CLASS, seed=1))
  write_files(root / 'b', labelled(('bird', 'cow', 'fish'), PER_CLASS, seed=2))
  return root / 'a', root / 'b'


def convert(source: Path, out, *extra: str) -> int:
  return cli.main([f'--input={source}', f'--output={out}', *RUN_ARGS, *extra])


@pytest.fixture(scope='module')
def fresh(sets, tmp_path_factory) -> Path:
  """Run B's complete output, made by one run into a new folder, which the tests convert run A
  into; a test copies it (copy_of), as it changes it."""
  out = tmp_path_factory.mktemp('fresh') / 'b'
  assert convert(sets[1], out) == 0
  return out


def copy_of(output: Path, out: Path) -> Path:
  shutil.copytree(output, out)
  return out


def tree(out: Path) -> Dict[str, bytes]:
  return {str(path.relative_to(out)): path.read_bytes() for path in sorted(out.rglob('*')) if path.is_file()}


def record(out) -> dict:
  info, _ = read_output(str(out))
  return info


def assert_dataset_of(out, labels, num_examples: int) -> None:
  """``out`` holds one complete, readable dataset: the run's whose photos have ``labels``."""
  if str(out).startswith('gs://'):  # TensorFlow's gs:// reads ignore the emulator: the record and labels.txt
    prefix = str(out)[len(f'gs://{BUCKET}/'):]
    info = json.loads(gcs_emulator.download(BUCKET, f'{prefix}/{MARKER}'))
    assert info['labels'] == list(labels) and info['num_examples'] == num_examples
    assert gcs_emulator.download(BUCKET, f'{prefix}/labels.txt').decode().split() == list(labels)
    return
  assert cli.main(['verify', str(out)]) == 0
  info, records = read_output(str(out))
  assert info['labels'] == list(labels) and info['num_examples'] == num_examples
  assert {r['image/class/text'].decode() for split in records.values() for r in split} == set(labels)
  assert sum(len(split) for split in records.values()) == num_examples


@contextlib.contextmanager
def held_at(point: str, source: Path, out, tmp_path: Path, environment=None) -> Iterator[subprocess.Popen]:
  """A run of ``source`` into ``out`` in a process of its own, waiting at ``point`` of its work
  until the block ends; yields the process, then waits for its end."""
  release = tmp_path / f'release-{point.replace(":", "-")}'
  log = tmp_path / f'held-{point.replace(":", "-")}.log'
  argv = [sys.executable, str(AT_POINT), f'wait={release}', point, f'--input={source}', f'--output={out}', *RUN_ARGS]
  with started(argv, log) as process:
    yield process
    release.touch()
    assert process.wait(timeout=300) == 0, log.read_text()[-3000:]


def wait_for(condition, process: subprocess.Popen, what: str) -> None:
  import time  # pylint: disable=import-outside-toplevel
  deadline = time.monotonic() + 240
  while not condition():
    assert process.poll() is None, f'the held run ended before {what}'
    assert time.monotonic() < deadline, f'no {what} within 240 s'
    time.sleep(0.05)


# --- 1. a folder is ours only when we wrote it ---------------------------------------------------


def test_another_tools_tfrecords_and_labels_are_refused_untouched(sets, tmp_path, capsys):
  """The issue's case: TFDS-style shard names and a labels.txt, in a folder with no marker of
  ours. Before: exit 0, the four shards deleted, labels.txt overwritten."""
  out = tmp_path / 'u'
  write_files(out, {f'train-0000{i}-of-00004.tfrecord': b'precious\n' for i in range(4)})
  write_files(out, {'labels.txt': b'mine\n'})
  before = tree(out)
  capsys.readouterr()
  assert convert(sets[0], out) == 2
  assert error_line(capsys.readouterr().err) == (
      f'error: --output={out} is not empty and holds no output of this tool (5 entries at its top, first: '
      'labels.txt); use an empty or new directory: nothing is written over files this tool did not write')
  assert tree(out) == before


def test_a_home_folder_as_output_is_refused_from_its_top_without_walking_it(tmp_path, capsys, monkeypatch):
  """--output=$HOME or /: refused from the names at its top, before its tree is walked."""
  home = tmp_path / 'home'
  for name in ('.bashrc', 'Documents/a.txt', 'Pictures/2019/b.jpg'):
    (home / name).parent.mkdir(parents=True, exist_ok=True)
    (home / name).write_text('x')
  walk = local_files.walk_local_files

  def walked(root, *args, **kwargs):
    assert str(root).rstrip('/') != str(home), 'the output was walked'
    return walk(root, *args, **kwargs)

  monkeypatch.setattr(local_files, 'walk_local_files', walked)
  assert cli.main([f'--input={home}/Pictures', f'--output={home}', *RUN_ARGS]) == 2
  assert capsys.readouterr().err.splitlines() == [
      f'error: --output={home} is not empty and holds no output of this tool (3 entries at its top, first: .bashrc); '
      'use an empty or new directory: nothing is written over files this tool did not write']


def test_a_shard_no_record_of_ours_lists_is_a_users_even_in_our_output(sets, fresh, tmp_path, capsys):
  out = copy_of(fresh, tmp_path / 'out')
  (out / 'train-00007-of-00009.tfrecord').write_bytes(b'a shard of my own')
  before = tree(out)
  capsys.readouterr()
  assert convert(sets[0], out) == 2
  assert 'holds 1 file(s) this tool did not write (first: train-00007-of-00009.tfrecord)' in error_line(
      capsys.readouterr().err)
  assert tree(out) == before


def test_what_a_dead_run_staged_is_never_committed(sets, fresh, tmp_path):
  """A killed run's staging folder, with a shard and labels of its own: the next run clears it
  and commits only what it wrote itself."""
  out = copy_of(fresh, tmp_path / 'out')
  dead = out / output_layout.TEMP_DIR / '20260101T000000Z-0dead0'
  write_files(dead, {'train-00000-of-00001.tfrecord': b'not a tfrecord', 'labels.txt': b'bird\n'})
  assert convert(sets[0], out, '--splits=train=0.5,validation=0.5') == 0
  assert_dataset_of(out, ('cat', 'dog'), 2 * PER_CLASS)
  assert not (out / output_layout.TEMP_DIR).exists()


# --- 2. one run at a time ------------------------------------------------------------------------


def test_a_second_run_into_a_busy_local_output_is_refused_before_any_work(sets, tmp_path, capsys):
  """Run A holds the output (stopped after checking its first images); run B, started then
  (in this process: A is the other process the lock keeps out), exits 2 at once naming A,
  and touches nothing; A completes with its own dataset, whole; B, run again once A has
  ended, replaces it with its own. Before: A's record and labels.txt over B's shards, and
  B's false 'unchanged'."""
  out = tmp_path / 'out'
  with held_at('checked:1', sets[0], out, tmp_path) as a:
    lock = out / output_layout.LOCK
    wait_for(lambda: lock.exists() and lock.stat().st_size, a, 'lock')
    holder = json.loads(lock.read_text())
    before = tree(out)
    capsys.readouterr()
    refused = convert(sets[1], out)
    stderr = capsys.readouterr().err
    assert refused == 2, stderr[-3000:]
    line = error_line(stderr)
    assert line.startswith(f'error: --output={out} is in use by another run: run {holder["run"]} '
                           f'(pid {a.pid} on {holder["host"]}, started '), line
    assert line.endswith('wait for it to end or stop it (its lock is freed the moment its process ends)')
    assert 'Traceback' not in stderr
    assert tree(out) == before
  assert_dataset_of(out, ('cat', 'dog'), 2 * PER_CLASS)
  assert not lock.exists()
  assert convert(sets[1], out) == 0
  assert_dataset_of(out, ('bird', 'cow', 'fish'), 3 * PER_CLASS)


def test_a_run_whose_lock_was_taken_commits_nothing(sets, tmp_path):
  """A's lock is removed while A works (a user who took it for stale), and B converts into the
  output meanwhile. A's commit finds the lock is B's: A commits nothing, B's dataset stands."""
  out = tmp_path / 'out'
  log = tmp_path / 'a.log'
  release = tmp_path / 'release-a'
  argv = [sys.executable, str(AT_POINT), f'wait={release}', 'checked:1', f'--input={sets[0]}', f'--output={out}',
          *RUN_ARGS]
  with started(argv, log) as a:
    lock = out / output_layout.LOCK
    wait_for(lambda: lock.exists() and lock.stat().st_size, a, 'lock')
    lock.unlink()
    assert convert(sets[1], out) == 0
    release.touch()
    assert a.wait(timeout=300) == 1
  text = log.read_text()
  assert 'no longer holds the lock' in error_line(text) and 'report it' not in text, text[-3000:]
  assert 'another run took' in text and 'unchanged' not in text and 'no complete dataset' not in text, text[-3000:]
  assert_dataset_of(out, ('bird', 'cow', 'fish'), 3 * PER_CLASS)


@pytest.mark.parametrize('committed', [False, True], ids=['while-the-other-commits', 'after-it-committed'])
def test_a_run_that_lost_its_lock_says_another_run_took_the_output(tmp_path, committed):
  """Whatever the output holds at that moment (nothing complete while the winner commits, or the
  winner's dataset), the loser says what happened, never that the output is unchanged or empty."""
  out = tmp_path / 'out'
  out.mkdir()
  if committed:
    (out / output_layout.RUN_RECORD).write_text('{}')
  error = LockLost(f'this run (a) no longer holds the lock of --output={out} (run b does)')
  failed = failures.explain(RuntimeError(f'{type(error).__module__}.LockLost: {error}'), str(out), 'a', None)
  assert failed.exit_code == 1 and 'no longer holds the lock' in failed.message
  assert failed.details[0] == (f'Nothing of this run was committed: another run took --output={out} over, and '
                               "what it holds is that run's to commit.")


def test_a_second_run_into_a_busy_gcs_output_is_refused(sets, tmp_path, capsys):
  """The same on gs://, through the storage emulator: B (in this process) reads A's lock and
  stops, naming it. (That two runs racing for an absent lock get one of it each time rests on
  Cloud Storage's generation precondition, which tests/pipeline/test_output_lock.py shows on
  fake-gcs-server.)"""
  with gcs_emulator.serving(str(tmp_path), [BUCKET]):
    out = f'gs://{BUCKET}/busy'
    with held_at('checked:1', sets[0], out, tmp_path) as a:
      wait_for(lambda: f'busy/{output_layout.LOCK}' in gcs_emulator.list_names(BUCKET, 'busy/'), a, 'lock')
      holder = json.loads(gcs_emulator.download(BUCKET, f'busy/{output_layout.LOCK}'))
      capsys.readouterr()
      refused = convert(sets[1], out)
      stderr = capsys.readouterr().err
      assert refused == 2, stderr[-3000:]
      line = error_line(stderr)
      assert line.startswith(f'error: --output={out} is in use by another run: run {holder["run"]} (pid {a.pid} on ')
      assert line.endswith(f'if it is gone, delete {out}/{output_layout.LOCK} (a lock not renewed for 5 min is taken '
                           'over by the next run)')
    assert_dataset_of(out, ('cat', 'dog'), 2 * PER_CLASS)
    assert f'busy/{output_layout.LOCK}' not in gcs_emulator.list_names(BUCKET, 'busy/')


# --- 12. the output's own mistakes: one line, exit 2 ---------------------------------------------


def test_an_output_that_is_a_file_or_under_one_is_refused_in_one_line(sets, tmp_path, capsys):
  (tmp_path / 'notes').write_text('mine')
  for out in (tmp_path / 'notes', tmp_path / 'notes' / 'out'):
    capsys.readouterr()
    assert convert(sets[0], out) == 2
    assert error_line(capsys.readouterr().err) == (
        f'error: --output={out} cannot be a folder: {tmp_path / "notes"} is a file; name a folder (new, empty or '
        'an earlier output)')
  assert (tmp_path / 'notes').read_text() == 'mine'


def in_a_mount(mount_options: str, directory: Path, *args: object) -> subprocess.CompletedProcess:
  """The command, run with a fresh tmpfs mounted on ``directory`` (a mount namespace of its own,
  so the mount goes with the process)."""
  script = f'mount -t tmpfs -o {mount_options} tmpfs "$1" && shift && exec "$@"'
  return subprocess.run(['unshare', '-m', 'sh', '-c', script, 'sh', str(directory), *command(*args)], cwd=ROOT,
                        env=user_environment(), capture_output=True, text=True, timeout=300, check=False)


needs_mounts = pytest.mark.skipif(
    shutil.which('unshare') is None or subprocess.run(['unshare', '-m', 'true'], capture_output=True,
                                                      check=False).returncode != 0,
    reason='needs a mount namespace (root, or unshare allowed) for a small or read-only file system')


@needs_mounts
def test_a_read_only_output_is_refused_before_any_work(sets, tmp_path):
  mounted = tmp_path / 'ro'
  mounted.mkdir()
  result = in_a_mount('ro,size=1m', mounted, f'--input={sets[0]}', f'--output={mounted}/out', *RUN_ARGS)
  assert result.returncode == 2, result.stderr[-3000:]
  assert error_line(result.stderr) == (f'error: --output={mounted}/out is not writable (Read-only file system); '
                                       'choose a folder you can write to')
  assert 'progress:' not in result.stderr


@needs_mounts
def test_a_full_disk_is_the_users_to_fix_not_a_bug(sets, tmp_path):
  """Run A's photos (about 110 KiB of shards) onto 64 KiB."""
  mounted = tmp_path / 'small'
  mounted.mkdir()
  out = f'{mounted}/out'
  result = in_a_mount('size=64k', mounted, f'--input={sets[0]}', f'--output={out}', *RUN_ARGS)
  assert result.returncode == 2, result.stderr[-3000:]
  assert error_line(result.stderr) == (f'error: the storage of --output={out} is full (No space left on device): '
                                       'free space there or choose another output, then rerun')
  assert 'report it' not in result.stderr and 'Traceback' not in result.stderr


# --- 13. Ctrl-C --------------------------------------------------------------------------------


def interrupted_at(point: str, source: Path, out: Path, tmp_path: Path) -> Tuple[int, str]:
  """A run Ctrl-C'd (SIGINT to its process group, as a terminal sends it) at ``point``."""
  log = tmp_path / 'interrupted.log'
  argv = [sys.executable, str(AT_POINT), 'interrupt', point, f'--input={source}', f'--output={out}', *RUN_ARGS]
  with started(argv, log) as process:
    code = process.wait(timeout=300)
  return code, log.read_text()


def test_ctrl_c_during_the_commit_lets_it_finish_then_exits_130(sets, fresh, tmp_path):
  """Interrupted right after labels.txt moved into place (the earlier marker gone, stale files
  not yet removed). Before: the earlier dataset left without its marker, and 'Nothing was
  committed' said."""
  out = copy_of(fresh, tmp_path / 'out')
  code, log = interrupted_at(f'after:{output_layout.LABELS_TXT}', sets[0], out, tmp_path)
  assert code == 130, log[-3000:]
  assert error_line(log) == (f'error: interrupted (Ctrl-C) during the commit, which was let finish: --output={out} '
                             'holds the new complete dataset')
  assert_dataset_of(out, ('cat', 'dog'), 2 * PER_CLASS)
  assert not (out / output_layout.TEMP_DIR).exists() and not (out / output_layout.LOCK).exists()


def test_ctrl_c_before_the_commit_keeps_the_earlier_dataset_and_exits_130(sets, fresh, tmp_path):
  """Before: 'RuntimeError: KeyboardInterrupt ... likely a bug in beam_pipeline ... report it'."""
  out = copy_of(fresh, tmp_path / 'out')
  marker = (out / MARKER).read_bytes()
  code, log = interrupted_at('checked:1', sets[0], out, tmp_path)
  assert code == 130, log[-3000:]
  assert error_line(log) == 'error: interrupted (Ctrl-C) before the commit'
  assert f'Nothing was committed: --output={out} still holds its earlier complete dataset, unchanged.' in log
  assert 'report it' not in log and 'Traceback' not in log
  assert (out / MARKER).read_bytes() == marker
  assert_dataset_of(out, ('bird', 'cow', 'fish'), 3 * PER_CLASS)
  assert not (out / output_layout.LOCK).exists()
  assert convert(sets[0], out) == 0  # the next run cleans up what the interrupted one staged
  assert not (out / output_layout.TEMP_DIR).exists()
