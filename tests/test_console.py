"""What a conversion shows: live progress, no library chatter, and a summary that agrees
with beam_pipeline.json (as text, and as JSON for scripts)."""
import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
import types
from typing import List

from beam_pipeline import cli
from beam_pipeline.cli import progress
from beam_pipeline.core.console import progress_counts

from helpers import hostile_files, photos
from helpers.commands import ROOT, TIMEOUT, chatter, command, in_process, run_cli, user_environment


def _tree(root, count=400):
  """Photos of two classes, and files that make decoders talk: a truncated JPEG, one with
  extra bytes after its end (which decodes), a bomb's header, a TIFF with a tag past
  its end (which decodes)."""
  files = photos.labelled(('cat', 'dog'), count // 2, seed=3, size=(64, 48))
  jpeg = photos.jpeg(5, 64, 48)
  files.update({'cat/truncated.jpg': jpeg[:len(jpeg) // 2], 'dog/trailing.jpg': jpeg + b'\0' * 40,
                'dog/bomb.png': hostile_files.png_with_size(100000, 100000),
                'cat/tag_past_end.tif': hostile_files.tiff_with_tag_past_the_end()})
  photos.write_files(root, files)


def test_a_run_in_a_terminal_shows_a_progress_bar_and_no_library_chatter(tmp_path):
  _tree(tmp_path / 'in')
  leader, follower = pty.openpty()
  fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 120, 0, 0))
  process = subprocess.Popen(command(f'--input={tmp_path}/in', f'--output={tmp_path}/out'), cwd=ROOT,
                             env=user_environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower)
  os.close(follower)
  screen = b''
  deadline = time.monotonic() + TIMEOUT
  while time.monotonic() < deadline:
    if select.select([leader], [], [], 0.1)[0]:
      try:
        chunk = os.read(leader, 65536)
      except OSError:  # the terminal's other end closed: the command ended
        break
      if not chunk:
        break
      screen += chunk
    elif process.poll() is not None:
      break
  summary = process.communicate(timeout=TIMEOUT)[0].decode()
  text = screen.decode('utf-8', 'replace')
  assert process.returncode == 0, text[-3000:]
  frames = [frame for frame in re.split('[\r\n]', text) if frame.strip()]
  assert re.search(r'checking: 100%\|.*\| 404/404 \[.*images/s, 2 rejected\]', text), frames[-10:]
  assert re.search(r'writing: 100%\|.*\| 402/402', text), frames[-10:]
  assert len([frame for frame in frames if frame.startswith('checking:')]) >= 2  # redrawn, not printed once
  assert not chatter(text), text[-3000:]
  assert [frame for frame in frames if not re.match(r'(listing|checking|writing|committing):', frame)] == []
  assert summary.startswith('Wrote 402 examples of 404 images, 2 classes, to ')


def _progress_lines(done, checked: str):
  """The progress lines of a run of _tree's files that ended well, not in a terminal: on standard
  output before the summary (a log's progress is no warning: Airflow logs standard error as
  warnings), standard error empty, a line at the end of each phase, checking's saying it checked
  ``checked`` images; and those."""
  assert done.returncode == 0, done.stderr[-3000:]
  assert done.stderr == '', done.stderr[-3000:]
  output = done.stdout.splitlines()
  lines = [line for line in output if line.startswith('progress: ')]
  assert not chatter(done.stdout), done.stdout[-3000:]
  assert output[:len(lines)] == lines and output[len(lines)].startswith('Wrote '), output
  ended = [line for line in lines if ' done: ' in line]
  assert [line.split(' done:')[0] for line in ended] == ['progress: listing', 'progress: checking', 'progress: writing']
  assert re.match(rf'progress: checking done: {checked} images in [0-9.]+ s \([0-9.,]+ images/s\), 2 rejected$',
                  ended[1])
  return lines, ended


def test_a_run_writing_to_a_log_prints_progress_lines(tmp_path, capfd, caplog):
  """In this process: the progress lines are the launcher's (the command's own standard error,
  TensorFlow's chatter included, is the terminal test's and the multi-process test's)."""
  _tree(tmp_path / 'in', count=1200)
  done = in_process([f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--progress_interval=0.2'], capfd, caplog)
  lines, ended = _progress_lines(done, '1,204')
  # How many periodic lines there are depends on when the progress thread woke (a loaded
  # machine wakes it late): their number is checked against a scripted clock below. Here:
  # every line is one of a phase in progress or done, in phase order, counts never going back.
  periodic = [re.match(r'progress: (?P<phase>listing|checking|writing|committing) (?P<done>[0-9,]+)( of '
                       r'(?P<total>[0-9,]+))? images(, [0-9.,]+ images/s)?, (?P<rejected>[0-9,]+) rejected'
                       r'(, [0-9,]+ checked)?(, (about [0-9]+|under 1) s left)?$', line)
              for line in lines if ' done: ' not in line]
  assert all(periodic), lines
  phases = ['listing', 'checking', 'writing', 'committing']
  progress_made = [(phases.index(m['phase']), int(m['done'].replace(',', '')), int(m['rejected'])) for m in periodic]
  assert progress_made == sorted(progress_made), lines
  assert all(m['total'] == '1,204' for m in periodic if m['phase'] == 'checking'), lines
  # A phase 10 intervals long with no line would mean --progress_interval was not honoured.
  checking = float(re.search(r'in ([0-9.]+) s', ended[1]).group(1))
  assert checking < 2.0 or any(m.group(1) == 'checking' for m in periodic), (checking, lines)


def test_beams_multi_process_mode_prints_the_workers_progress_and_no_library_chatter(tmp_path):
  _tree(tmp_path / 'in', count=40)  # the counts are the SDK workers', which the launcher sums
  done = run_cli(f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--progress_interval=0.2',
                 '--direct_num_workers=2', '--direct_running_mode=multi_processing')
  _, ended = _progress_lines(done, '44')
  assert re.match(r'progress: writing done: 42 images in ', ended[2])
  assert 'Wrote 42 examples of 44 images, 2 classes, to ' in done.stdout


class _ScriptedRun:
  """A Counter whose snapshots follow a script, one per call, each call moving a fake clock on
  by STEP; once the script is used up, the clock stops and ``finished`` is set."""
  STEP = 1 / 64  # binary fractions: the clock's sums are exact

  def __init__(self, script):
    self.script, self.calls, self.now = script, 0, 0.0
    self.finished = threading.Event()

  def snapshot(self) -> progress_counts.Snapshot:
    if self.calls < len(self.script):
      self.now += self.STEP
      self.calls += 1
    else:
      self.finished.set()
    return self.script[min(self.calls, len(self.script)) - 1]

  def monotonic(self) -> float:
    return self.now


def _lines_printed(monkeypatch, script: List[progress_counts.Snapshot], interval: float) -> List[str]:
  """The lines the progress thread prints for a run that follows ``script`` (_ScriptedRun)."""
  run = _ScriptedRun(script)
  monkeypatch.setattr(progress, 'time', types.SimpleNamespace(monotonic=run.monotonic))
  stream = io.StringIO()
  with progress.shown(stream, interval=interval, counter=run):
    assert run.finished.wait(TIMEOUT)
  assert run.calls == len(script)
  return stream.getvalue().splitlines()


def test_progress_lines_come_every_interval_of_the_clock_and_once_per_phase_end(monkeypatch):
  """The line-writing progress thread against a scripted run and clock: a line every
  interval (4 steps of the clock) within a phase, one line when a phase ends; nothing
  depends on when the thread happens to wake up."""
  step = _ScriptedRun.STEP
  script = ([progress_counts.Snapshot('checking', 10 * i, 160, i // 4, 0.0) for i in range(16)] +
            [progress_counts.Snapshot('writing', 20 * i, 150, 3, 16 * step) for i in range(8)] +
            [progress_counts.Snapshot('committing', 150, 150, 3, 24 * step)])
  # Call k of snapshot() happens at k/64 s. Lines at calls 5, 9, 13 (4/64 s apart), the end of
  # checking at call 17 (writing began at 16/64 s), a line at call 21, the end of writing at 25.
  assert _lines_printed(monkeypatch, script, interval=4 * step) == [
      'progress: checking 40 of 160 images, 512 images/s, 1 rejected, under 1 s left',  # 40 / (5/64 s)
      'progress: checking 80 of 160 images, 569 images/s, 2 rejected, under 1 s left',
      'progress: checking 120 of 160 images, 591 images/s, 3 rejected, under 1 s left',
      'progress: checking done: 160 images in 0.2 s (640 images/s), 3 rejected',  # in 16/64 s
      'progress: writing 80 of 150 images, 1,024 images/s, 3 rejected, under 1 s left',  # 80 / (5/64 s)
      'progress: writing done: 150 images in 0.1 s (1,200 images/s), 3 rejected',  # in 8/64 s
  ]


def test_a_phase_that_began_and_ended_between_two_looks_still_gets_its_line(monkeypatch):
  """The counters keep every phase that ended (progress_counts.Snapshot.ended): writing a few
  images can take less than the console's half-second look, and its line must not go missing."""
  step = _ScriptedRun.STEP
  checking = progress_counts.Snapshot('checking', 160, 160, 3, 0.0)
  writing = progress_counts.Snapshot('writing', 150, 150, 3, 16 * step)
  script = ([progress_counts.Snapshot('checking', 10 * i, 160, 0, 0.0) for i in range(4)] +
            [progress_counts.Snapshot('committing', 150, 150, 3, 20 * step, ended=(checking, writing))])
  assert _lines_printed(monkeypatch, script, interval=64 * step) == [
      'progress: checking done: 160 images in 0.2 s (640 images/s), 3 rejected',  # in 16/64 s
      'progress: writing done: 150 images in 0.1 s (2,400 images/s), 3 rejected',  # in 4/64 s
  ]


def test_a_listing_that_ends_after_checking_began_is_timed_to_its_own_end(monkeypatch):
  """A local run checks images while the listing goes on: the listing's line says how long the
  listing took, not how long until the first image was checked."""
  step = _ScriptedRun.STEP
  listing = progress_counts.Snapshot('listing', 160, None, 0, 0.0, finished=12 * step)
  script = ([progress_counts.Snapshot('listing', 10 * i, None, 0, 0.0) for i in range(4)] +
            [progress_counts.Snapshot('checking', 100, 160, 0, 2 * step, ended=(listing,))] * 2)
  assert _lines_printed(monkeypatch, script, interval=64 * step)[0] == (
      'progress: listing done: 160 images in 0.2 s (853 images/s), 0 rejected')  # in 12/64 s


def test_a_slow_phase_of_large_images_reads_as_moving_not_stalled():
  """Eight-thousand-pixel images go by at a few a second or less: the rate keeps a decimal, and
  the time left does not grow while an image is under way."""
  assert progress.line(progress_counts.Snapshot('writing', 3, 16, 0, 0.0), now=10.0) == (
      'progress: writing 3 of 16 images, 0.3 images/s, 0 rejected, about 43 s left')
  # Four written in the first 8 s, none since: the time left counts down from what 8 s said (24 s),
  # and once that has run out it is no longer said.
  assert [progress.line(progress_counts.Snapshot('writing', 4, 16, 0, 0.0), now=now, moved=8.0) for now in
          (8.0, 18.0, 40.0)] == [
      'progress: writing 4 of 16 images, 0.5 images/s, 0 rejected, about 24 s left',
      'progress: writing 4 of 16 images, 0.2 images/s, 0 rejected, about 14 s left',
      'progress: writing 4 of 16 images, 0.1 images/s, 0 rejected']
  # Nothing written yet (the shards are being planned): no rate of 0.
  assert progress.line(progress_counts.Snapshot('writing', 0, 16, 2, 0.0), now=3.0) == (
      'progress: writing 0 of 16 images, 2 rejected')
  # A listing that goes on while images are checked says how many are.
  assert progress.line(progress_counts.Snapshot('listing', 300, None, 2, 0.0, checked_meanwhile=120), now=3.0) == (
      'progress: listing 300 images, 100 images/s, 2 rejected, 120 checked')
  # Under half a second left reads as such, not as 'about 0 s left'.
  assert progress.line(progress_counts.Snapshot('writing', 15, 16, 0, 0.0), now=3.0) == (
      'progress: writing 15 of 16 images, 5.0 images/s, 0 rejected, under 1 s left')


def test_a_terminal_without_a_size_gets_the_lines_not_a_bar(monkeypatch):
  """A terminal that reports 0 columns cannot hold a bar (tqdm drew nothing there)."""
  step = _ScriptedRun.STEP
  script = ([progress_counts.Snapshot('checking', 20 * i, 160, 0, 0.0) for i in range(8)] +
            [progress_counts.Snapshot('committing', 160, 160, 0, 8 * step)])
  run = _ScriptedRun(script)
  monkeypatch.setattr(progress, 'time', types.SimpleNamespace(monotonic=run.monotonic))
  leader, follower = pty.openpty()
  fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack('HHHH', 0, 0, 0, 0))
  with os.fdopen(follower, 'w') as stream:
    assert stream.isatty()
    with progress.shown(stream, interval=4 * step, counter=run):
      assert run.finished.wait(TIMEOUT)
  output = os.read(leader, 1 << 16).decode()
  os.close(leader)
  assert output.splitlines() == ['progress: checking 80 of 160 images, 1,024 images/s, 0 rejected, under 1 s left',
                                 'progress: checking done: 160 images in 0.1 s (1,280 images/s), 0 rejected']


def test_the_summary_and_its_json_agree_with_dataset_info(tmp_path, capsys):
  files = photos.labelled(('ant', 'bee', 'cat'), 40, seed=7, size=(40, 30))
  files['ant/copy.jpg'] = files['ant/ant.0.jpg']
  files['bee/empty.jpg'] = b''
  photos.write_files(tmp_path / 'in', files)
  args = [f'--input={tmp_path}/in', '--splits=train=0.75,validation=0.25', '--target_shard_mb=0.02']
  assert cli.main([*args, f'--output={tmp_path}/out', '--json']) == 0
  printed = json.loads(capsys.readouterr().out)
  info = json.loads((tmp_path / 'out' / 'beam_pipeline.json').read_text())
  assert printed['num_examples'] == info['num_examples'] == 121 and printed['num_inputs'] == 122
  assert printed['errors_by_reason'] == info['errors_by_reason'] == {'empty': 1}
  assert printed['duplicates'] == {'num_groups': 1, 'num_extra_copies': 1, 'removed': False}
  assert printed['errors_file'] == str(tmp_path / 'out' / 'errors-00000-of-00001.jsonl')
  assert printed['wall_seconds'] > 0 and printed['images_per_second'] > 0
  for name, split in info['splits'].items():
    assert printed['splits'][name] == {'num_examples': split['num_examples'], 'num_bytes': split['num_bytes'],
                                       'num_shards': len(split['shards']), 'classes': split['classes'],
                                       'shards': split['shards']}
    assert sum(split['classes'].values()) == split['num_examples']
  assert printed['splits']['train']['num_shards'] >= 2

  assert cli.main([*args, f'--output={tmp_path}/text']) == 0
  text = [line for line in capsys.readouterr().out.splitlines() if not line.startswith('progress: ')]
  assert text[0].startswith(f'Wrote 121 examples of 122 images, 3 classes, to {tmp_path}/text in ')
  for name, split in info['splits'].items():
    line = next(line for line in text if line.strip().startswith(name + ' '))
    shards = len(split['shards'])
    assert f'{split["num_examples"]} examples in {shards} shard{"s" if shards > 1 else ""} (' in line
    assert ', '.join(f'{label} {count}' for label, count in split['classes'].items()) in line
  near = printed['near_duplicates']
  assert {key: near[key] for key in ('distance', 'num_groups', 'num_images', 'removed')} == {
      key: info['near_duplicates'][key] for key in ('distance', 'num_groups', 'num_images', 'removed')}
  ending = [f'Rejected 1 input: empty 1; see {tmp_path}/text/errors-00000-of-00001.jsonl',
            '1 duplicate copy in 1 group (kept, each group in one split).']
  if near['num_groups']:
    ending.append(f'{near["num_images"]} images in {near["num_groups"]} group{"s" if near["num_groups"] > 1 else ""} '
                  f'of near copies (perceptual hashes within 10 bits; each group in one split')
  assert [line[:len(expected)] for line, expected in zip(text[-len(ending):], ending)] == ending


def test_verbose_lets_beams_info_lines_through(tmp_path, capfd, caplog):
  """Without it (in this process), none of Beam's INFO records reaches the root logger, whose handler
  prints them; with it, the command prints them (in its own process: --verbose leaves Beam's
  logger at INFO)."""
  photos.write_files(tmp_path / 'in', photos.labelled(('cat',), 3))
  quiet = in_process([f'--input={tmp_path}/in', f'--output={tmp_path}/quiet'], capfd, caplog)
  verbose = subprocess.run(command(f'--input={tmp_path}/in', f'--output={tmp_path}/verbose', '--verbose'), cwd=ROOT,
                           capture_output=True, text=True, timeout=TIMEOUT, check=False)
  assert quiet.returncode == verbose.returncode == 0
  assert 'INFO:apache_beam' not in quiet.stderr and 'INFO:apache_beam' in verbose.stderr


def test_progress_lines_go_to_standard_output_unless_it_holds_json():
  """Not in a terminal (as under pytest), progress is the run's log, beside the summary: Airflow's
  Beam operator logs a command's standard error at WARNING. --json keeps standard output JSON."""
  with progress.console() as stream:
    assert stream is sys.stdout
  with progress.console(json=True) as stream:
    assert stream is not sys.stdout
