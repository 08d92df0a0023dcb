"""Counts kept by worker processes in files of their own, and summed by the launcher."""
import os

from beam_pipeline.core.console import progress_counts
from beam_pipeline.core.console.progress_counts import CHECKING, COMMITTING, LISTING, WRITING


def test_the_launcher_sums_what_each_worker_counted_and_follows_the_phases():
  with progress_counts.gathered() as gathered:
    folder = os.environ[progress_counts.SHARED_FOLDER]
    first, second = progress_counts.Published(folder, 'a'), progress_counts.Published(folder, 'b')
    assert gathered.snapshot()[:4] == (LISTING, 0, None, 0)
    first.parts_planned(2)
    first.part_listed()
    first.listed(30)
    assert gathered.snapshot()[:4] == (LISTING, 30, None, 0)  # one part of two listed
    second.part_listed()
    second.listed(20)
    assert gathered.snapshot()[:4] == (CHECKING, 0, 50, 0)
    first.checked(30, rejected=2)
    second.checked(15, rejected=1)
    assert gathered.snapshot()[:4] == (CHECKING, 45, 50, 3)
    second.checked(5, rejected=0)
    second.rejected(1)  # a dropped copy
    assert gathered.snapshot()[:4] == (WRITING, 0, 46, 4)
    first.written(26)
    second.written(20)
    assert gathered.snapshot()[:4] == (COMMITTING, 46, 46, 4)
  assert progress_counts.SHARED_FOLDER not in os.environ
  assert not os.path.exists(folder)


def test_a_phase_starts_when_the_summed_counts_enter_it():
  with progress_counts.gathered() as gathered:
    worker = progress_counts.Published(os.environ[progress_counts.SHARED_FOLDER], 'a')
    listing = gathered.snapshot()
    worker.parts_planned(1)
    worker.part_listed()
    worker.listed(3)
    checking = gathered.snapshot()
    assert checking.phase == CHECKING and checking.started >= listing.started
    assert gathered.snapshot().started == checking.started


def test_a_process_counts_in_the_folder_its_environment_names(monkeypatch, tmp_path):
  monkeypatch.setenv(progress_counts.SHARED_FOLDER, str(tmp_path))
  counts = progress_counts._for_this_process()
  counts.listed(7)
  assert os.listdir(tmp_path) == [f'{os.getpid()}.json']
  assert progress_counts.Gathered(str(tmp_path)).snapshot().done == 7
  monkeypatch.delenv(progress_counts.SHARED_FOLDER)
  assert type(progress_counts._for_this_process()) is progress_counts.Counts


def test_every_phase_ends_in_order_even_one_the_counts_pass_in_a_single_change():
  """Validation can keep up with the listing: the last part listed then ends checking as well,
  and a run's writing can end between two looks of the console. Each ended phase is kept, as
  it stood, for the console to print."""
  counts = progress_counts.Counts()
  counts.parts_planned(2)
  counts.part_listed()
  counts.listed(10)
  counts.checked(10, rejected=1)
  assert counts.snapshot().ended == ()
  counts.part_listed()  # everything listed was checked already
  writing = counts.snapshot()
  assert writing[:4] == (WRITING, 0, 9, 1)
  assert [phase[:4] for phase in writing.ended] == [(LISTING, 10, None, 1), (CHECKING, 10, 10, 1)]
  assert writing.ended[0].started <= writing.ended[1].started <= writing.started
  counts.written(9)
  committing = counts.snapshot()
  assert committing[:4] == (COMMITTING, 9, 9, 1)
  assert committing.ended[:2] == writing.ended and committing.ended[2][:5] == (WRITING, 9, 9, 1, writing.started)


def test_checking_is_timed_from_its_first_image_handed_to_validation_even_while_the_listing_goes_on(monkeypatch):
  """A local run checks images while the listing goes on. Checking's clock then starts at its
  first image handed to validation, so that its time and rate are its own, not the few images
  left once the listing ends (a run of 20,000 photos said it checked them in 0.1 s, at 158,861
  images/s); the listing ends when it does, not at checking's start."""
  clock = iter(range(100))
  monkeypatch.setattr(progress_counts.time, 'monotonic', lambda: float(next(clock)))
  counts = progress_counts.Counts()  # listing from 0
  counts.parts_planned(1)  # 1
  counts.listed(10)  # 2
  counts.handed(10)  # 3: checking begins while the listing goes on
  counts.checked(4, rejected=0)  # 4
  counts.listed(10)  # 5
  assert counts.snapshot().checked_meanwhile == 4  # 6
  counts.handed(10)  # 7
  counts.checked(4, rejected=0)  # 8
  counts.part_listed()  # 9: the listing ends
  checking = counts.snapshot()  # 10
  assert checking[:5] == (CHECKING, 8, 20, 0, 3.0) and checking.checked_meanwhile == 0
  assert checking.ended[0][:5] == (LISTING, 20, None, 0, 0.0) and checking.ended[0].finished == 9.0
  counts.checked(12, rejected=1)  # 11: checking ends, writing has not moved
  writing = counts.snapshot()  # 12
  assert writing[:5] == (WRITING, 0, 19, 1, 11.0)
  assert writing.ended[1][:5] == (CHECKING, 20, 20, 1, 3.0) and writing.ended[1].finished == 11.0


def test_checking_waits_for_the_workers_to_start_without_counting_that_wait(monkeypatch):
  """The listing can end before the pool's first worker is forked: checking's clock starts when
  its first images are handed to a worker, not while the forkserver still imports TensorFlow."""
  clock = iter(range(100))
  monkeypatch.setattr(progress_counts.time, 'monotonic', lambda: float(next(clock)))
  counts = progress_counts.Counts()  # listing from 0
  counts.parts_planned(1)  # 1
  counts.listed(10)  # 2
  counts.part_listed()  # 3: the listing ends, checking begins, nothing handed yet
  assert counts.snapshot()[:5] == (CHECKING, 0, 10, 0, 3.0)  # 4
  counts.handed(10)  # 5: the first worker took them
  counts.checked(6, rejected=0)  # 6
  assert counts.snapshot()[:5] == (CHECKING, 6, 10, 0, 5.0)  # 7


def test_phases_only_move_on_when_summed_counts_step_back():
  """A worker's counts file is missing while it is being replaced: the sum steps back a moment,
  and the phase it seems to be in again must not end a second time."""
  with progress_counts.gathered() as gathered:
    folder = os.environ[progress_counts.SHARED_FOLDER]
    first, second = progress_counts.Published(folder, 'a'), progress_counts.Published(folder, 'b')
    first.parts_planned(1)
    first.part_listed()
    first.listed(5)
    second.checked(0, rejected=0)
    assert gathered.snapshot().phase == CHECKING
    first.checked(5, rejected=0)
    writing = gathered.snapshot()
    assert writing.phase == WRITING
    os.remove(os.path.join(folder, 'a.json'))  # the sum lacks the listing a moment
    second.written(0)
    assert gathered.snapshot().phase == WRITING
    first.written(5)
    committing = gathered.snapshot()
    assert committing.phase == COMMITTING
    assert [phase.phase for phase in committing.ended] == [LISTING, CHECKING, WRITING]


def test_a_change_that_counts_nothing_rewrites_no_worker_file(tmp_path):
  """Planning tells the counts each content group's dropped copies, mostly none: a worker's file
  is rewritten only when a count moves."""
  published = progress_counts.Published(str(tmp_path), 'a')
  published.listed(3)
  path = tmp_path / 'a.json'
  before = path.stat().st_mtime_ns, path.stat().st_ino
  published.rejected(0)
  published.checked(0, rejected=0)
  assert (path.stat().st_mtime_ns, path.stat().st_ino) == before
  published.rejected(1)
  assert path.stat().st_ino != before[1]
