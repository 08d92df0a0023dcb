"""prepare_image against TensorFlow itself: the table of bad and odd inputs, and what
the decoders print while a batch decodes (damage, failures)."""
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from beam_pipeline.core.images import image_info, preparation, tensorflow_decoding
from beam_pipeline.core.rejections import Rejected

from helpers import cyclic_garbage, image_cases, photos, pillow_modes
from helpers.commands import ROOT
from helpers.decoders import assert_decodes_everywhere
from helpers.image_cases import cases

CASES = cases()
WRITTEN = [c for c in CASES.values() if c.reason is None]
REJECTED = [c for c in CASES.values() if c.reason is not None]


@pytest.mark.parametrize('case', WRITTEN, ids=lambda c: c.name)
def test_written_cases_decode_in_tensorflow_to_the_recorded_shape(case):
  prepared = preparation.prepare_image(case.data, max_pixels=10**8)
  info = prepared.info
  assert (info.format, info.channels, info.reencoded) == (case.format, case.channels, case.reencoded)
  decoded = tf.io.decode_image(prepared.stored, channels=3, expand_animations=False)
  assert decoded.shape == (info.height, info.width, 3)
  native = tf.io.decode_image(prepared.stored, channels=0, expand_animations=False)
  assert native.shape[-1] == info.channels
  if not case.reencoded:
    assert prepared.stored is case.data  # TensorFlow-readable bytes are kept as they are


@pytest.mark.parametrize('case', REJECTED, ids=lambda c: c.name)
def test_rejected_cases_give_their_reason(case):
  with pytest.raises(Rejected) as raised:
    preparation.prepare_image(case.data, max_pixels=10**8)
  assert raised.value.reason == case.reason
  assert raised.value.detail


@pytest.mark.parametrize('data, detail', [
    (b'root:x:0:0:root:/root:/bin/bash\n', '32 bytes of text'),
    (b'HOME=/root\x00PATH=/bin\x00', '21 bytes of binary data'),  # /proc/self/environ's layout
    (b'%PDF-1.7\n' + bytes(100), '109 bytes of a PDF document'),
    (b'\x7fELF\x02\x01' + bytes(58), '64 bytes of an ELF executable'),
    (b'<!DOCTYPE html><html>denied</html>', 'looks like an HTML page'),
])
def test_a_file_that_is_no_image_is_described_by_its_length_and_kind_never_its_bytes(data, detail):
  """The errors file used to quote a file's first 8 bytes in hex: a manifest naming /etc/passwd
  got 'root:x:0' into it."""
  with pytest.raises(Rejected) as raised:
    preparation.prepare_image(data, max_pixels=10**8)
  assert (raised.value.reason, raised.value.detail) == ('not_image', f'not a recognised image format ({detail})')


def test_reencoding_is_lossless_and_deterministic():
  case = CASES['scan.tiff']
  first = preparation.prepare_image(case.data, max_pixels=10**8).stored
  assert first == preparation.prepare_image(case.data, max_pixels=10**8).stored
  from PIL import Image
  import io
  with Image.open(io.BytesIO(case.data)) as source, Image.open(io.BytesIO(first)) as stored:
    assert list(source.convert('RGB').getdata()) == list(stored.convert('RGB').getdata())


def test_pixel_limit_applies_before_decoding():
  preparation.prepare_image(CASES['photo.jpg'].data, max_pixels=64 * 48)
  with pytest.raises(Rejected) as raised:
    preparation.prepare_image(CASES['photo.jpg'].data, max_pixels=64 * 48 - 1)
  assert raised.value.reason == 'too_many_pixels'


def test_a_batch_gives_the_same_results_as_one_by_one():
  datas = [c.data for c in CASES.values()]
  batch = preparation.prepare_images(datas, max_pixels=10**8)
  for data, result in zip(datas, batch):
    try:
      alone = preparation.prepare_image(data, max_pixels=10**8)
    except Rejected as e:
      alone = e
    assert _comparable(result) == _comparable(alone)
  tf_only = batch[list(CASES).index('marker-in-scan.jpg')]  # fails the batch, found one by one
  assert isinstance(tf_only, Rejected) and 'in TensorFlow' in tf_only.detail


@pytest.mark.skipif(not hasattr(os, 'sched_setaffinity') or len(os.sched_getaffinity(0)) < 2,
                    reason='needs two cores to tell one core from several')
def test_a_batch_decoded_on_one_core_gives_what_the_decode_on_every_core_gives(monkeypatch):
  """A local worker runs on a core of its own, where a batch's images decode one after the
  other instead of in parallel: failures and all, the results are the same."""
  datas = [c.data for c in CASES.values()]
  in_order, original = [], tensorflow_decoding._DECODED_IN_ORDER  # pylint: disable=protected-access
  monkeypatch.setattr(tensorflow_decoding, '_DECODED_IN_ORDER', lambda *args: in_order.append(1) or original(*args))
  everywhere = preparation.prepare_images(datas, max_pixels=10**8)
  assert not in_order
  cores = os.sched_getaffinity(0)
  os.sched_setaffinity(0, {min(cores)})  # this thread's, as a worker's initializer sets its process's
  try:
    one_core = preparation.prepare_images(datas, max_pixels=10**8)
  finally:
    os.sched_setaffinity(0, cores)
  assert in_order
  for name, on_one, on_every in zip(CASES, one_core, everywhere):
    assert _comparable(on_one) == _comparable(on_every), name


def _comparable(result):
  """A result of prepare_images as it compares: a rejection by its type, reason and detail (an
  exception compares by identity), a prepared image whole."""
  return (Rejected, result.reason, result.detail) if isinstance(result, Rejected) else (type(result), result)


def test_a_batch_with_rejections_leaves_no_garbage_cycles():
  """Rejections are returned as values; a traceback kept on one led back, through its
  frames, to the list of results, so a whole chunk of image bytes outlived the call
  until the next full collection (memory grew with the input)."""
  datas = [c.data for c in CASES.values()]
  with cyclic_garbage.collected() as garbage:
    batch = preparation.prepare_images(datas, max_pixels=10**8)
    assert sum(isinstance(result, Rejected) for result in batch) == len(REJECTED)
    del batch
  assert not [o for o in garbage if isinstance(o, (bytes, Rejected, image_info.PreparedImage))]


def test_what_a_decoder_prints_goes_into_the_rejection_not_onto_the_console(capfd):
  """libjpeg prints its warnings straight to standard error; for a file it rejects they
  belong in the file's detail, and for none on the console."""
  capfd.readouterr()
  results = preparation.prepare_images([CASES['marker-in-scan.jpg'].data, CASES['photo.jpg'].data,
                                   CASES['truncated.jpg'].data], max_pixels=10**8)
  assert 'the decoder said: Corrupt JPEG data' in results[0].detail
  assert not isinstance(results[1], Rejected)
  assert capfd.readouterr().err == ''


def test_pillows_warnings_about_damaged_metadata_stay_off_the_console():
  """Pillow warns, once per process, about a TIFF tag past the end of the file, and
  decodes the image. The shard writer's process may meet the file first when it
  re-encodes it, so a fresh interpreter with Python's default warning filters does
  just that."""
  script = ('from beam_pipeline.core.console import quiet_import\n'
            'quiet_import.tensorflow()\n'
            'from beam_pipeline.core import settings\n'
            'from beam_pipeline.core.images import image_info, preparation, reencoding\n'
            'from helpers import hostile_files\n'
            'data = hostile_files.tiff_with_tag_past_the_end()\n'
            'stored = reencoding.reencode_again(data, settings.StoredImages()).stored\n'
            'info = preparation.prepare_image(data, max_pixels=10**8).info\n'
            'print(info.format, info.reencoded, image_info.sha256_hex(stored) == image_info.sha256_hex(\n'
            '    preparation.prepare_image(data, max_pixels=10**8).stored))\n')
  done = subprocess.run([sys.executable, '-c', script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                        env={**os.environ, 'PYTHONPATH': str(ROOT / 'tests')}, check=False)
  assert (done.stdout, done.stderr) == ('png True True\n', '')


def _damaged_jpegs():
  """JPEGs that TensorFlow decodes with libjpeg warnings: a scan cut short (its end marker
  follows at once) and extraneous bytes between two header segments."""
  jpeg = photos.jpeg(3, 64, 48, quality=90)
  scan = jpeg.index(b'\xff\xda')
  tables = jpeg.index(b'\xff\xdb')
  return {'premature end of data segment': jpeg[:(scan + len(jpeg)) // 2] + b'\xff\xd9',
          '2 extraneous bytes before marker 0xdb': jpeg[:tables] + b'\x00\x00' + jpeg[tables:]}


def test_damaged_jpegs_are_told_apart_from_clean_ones_in_one_batch():
  """Expected: each damaged JPEG's info names libjpeg's warning; clean JPEGs (baseline,
  progressive, gray, CMYK, with bytes after the end marker) and PNGs say nothing; the
  damaged ones still decode everywhere, so they are stored unless --strict_jpeg."""
  damaged = _damaged_jpegs()
  clean = [photos.jpeg(1), photos.encode(photos.image(2), 'JPEG', progressive=True),
           photos.encode(photos.image(3).convert('L'), 'JPEG'), pillow_modes.cases()['cmyk.jpg'].data,
           photos.jpeg(4) + b'trailing bytes', photos.encode(photos.image(5), 'PNG')]
  results = preparation.prepare_images([*clean[:3], *damaged.values(), *clean[3:]], 10**8)
  assert [r.info.damage for r in results[:3] + results[5:]] == [''] * len(clean)
  for warning, result in zip(damaged, results[3:5]):
    assert warning in result.info.damage
    assert_decodes_everywhere(result)


def test_what_a_failing_jpeg_prints_sends_no_decoded_jpeg_to_be_decoded_again(monkeypatch):
  """A JPEG with a stray marker in its scan (libjpeg in TensorFlow prints warnings, then fails
  it) among clean ones. Expected: rejected; the clean ones undamaged, and none of them decoded
  a second time to find out, since the failure alone printed what the batch printed."""
  cut = image_cases._marker_in_scan(photos.jpeg(7, 64, 48, quality=90))  # pylint: disable=protected-access
  probed = []
  original = tensorflow_decoding.jpeg_warnings
  monkeypatch.setattr(tensorflow_decoding, 'jpeg_warnings',
                      lambda data, decoders: probed.append(data) or original(data, decoders))
  results = preparation.prepare_images([photos.jpeg(1), cut, photos.jpeg(2)], 10**8)
  assert isinstance(results[1], Rejected)
  assert [r.info.damage for r in (results[0], results[2])] == ['', '']
  assert probed == []
  damaged = list(_damaged_jpegs().values())[0]
  results = preparation.prepare_images([photos.jpeg(1), cut, damaged], 10**8)
  assert results[2].info.damage and len(probed) == 2  # a decoded JPEG warned: both decoded ones looked at


def test_with_tensorflow_s_log_lines_let_through_a_failing_jpeg_still_sends_none_to_be_decoded_again():
  """A user's TF_CPP_MIN_LOG_LEVEL=0 lets TensorFlow's log lines through (its first op's CUDA
  probe, jpeg_mem.cc's line for the failing JPEG, each with its time and thread). Expected: as
  above, no clean JPEG is decoded a second time, and none is called damaged."""
  script = ('from beam_pipeline.core.images import preparation, tensorflow_decoding\n'
            'from helpers import image_cases, photos\n'
            'probed = []\n'
            'original = tensorflow_decoding.jpeg_warnings\n'
            'tensorflow_decoding.jpeg_warnings = lambda data, said: probed.append(data) or original(data, said)\n'
            'cut = image_cases._marker_in_scan(photos.jpeg(7, 64, 48, quality=90))\n'
            'results = preparation.prepare_images([photos.jpeg(1), cut, photos.jpeg(2)], 10**8)\n'
            'print(type(results[1]).__name__, [r.info.damage for r in (results[0], results[2])], len(probed))\n')
  done = subprocess.run([sys.executable, '-c', script], cwd=ROOT,
                        capture_output=True, text=True, timeout=120, check=False,
                        env={**os.environ, 'PYTHONPATH': str(ROOT / 'tests'), 'TF_CPP_MIN_LOG_LEVEL': '0'})
  assert done.stdout == "Rejected ['', ''] 0\n", done.stderr[-2000:]
