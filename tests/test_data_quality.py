"""The data-quality report of a conversion: every flag raised by the image made to raise it, counted
per split, flag and class in beam_pipeline.json, said in the summary and listed by inspect; and
--reject_quality rejecting what it names, each file still written or rejected exactly once."""
import io
import json
from pathlib import Path
from typing import Dict, Tuple

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageFilter

from beam_pipeline.core import option_table
from beam_pipeline.core.images import image_quality
from beam_pipeline.inspection import overview
from beam_pipeline.core.output import catalog_entries
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.synthetic import natural_photos
from helpers.commands import convert
from helpers.dataset_reader import read_output

SIZE = (320, 240)


def _png(image: Image.Image) -> bytes:
  """PNG: its decode is whole, so the statistics hold at this small size (a JPEG's 1/8-scale
  decode reads less sharp under about 1,000 pixels a side: image_quality)."""
  buffer = io.BytesIO()
  image.save(buffer, 'PNG')
  return buffer.getvalue()


def made_images() -> Dict[str, Tuple[bytes, str]]:
  """{file name: (PNG bytes, the flag it is made to raise, '' for none)}: ordinary photos, and
  one of each flag made from another photo."""
  photo = lambda seed: natural_photos.photo(seed, *SIZE)  # noqa: E731  pylint: disable=unnecessary-lambda-assignment
  flat = np.full((SIZE[1], SIZE[0], 3), 128, np.uint8) + np.random.default_rng(7).integers(0, 2, (SIZE[1], SIZE[0], 1),
                                                                                           dtype=np.uint8)
  made = {f'ordinary-{seed}.png': (photo(seed), '') for seed in range(6)}
  made.update({
      'dark.png': (ImageEnhance.Brightness(photo(10)).enhance(0.15), image_quality.DARK),
      'light.png': (Image.blend(photo(11), Image.new('RGB', SIZE, 'white'), 0.97), image_quality.LIGHT),
      'blurry.png': (photo(12).filter(ImageFilter.GaussianBlur(12)), image_quality.BLURRY),
      'blank.png': (Image.fromarray(flat), image_quality.LOW_INFORMATION),
      'strip.png': (photo(13).resize((SIZE[0] * 2, SIZE[1] // 3)), image_quality.EXTREME_ASPECT_FLAG),
      'gray.png': (photo(14).convert('L').convert('RGB'), image_quality.GRAYSCALE_AS_RGB),
  })
  return {name: (_png(image), flag) for name, (image, flag) in made.items()}


@pytest.fixture(scope='module')
def photos(tmp_path_factory) -> Tuple[Path, Dict[str, str]]:
  """Two classes of the made images, and each file's flag by its path under the input."""
  root = tmp_path_factory.mktemp('quality') / 'in'
  flags = {}
  for index, (name, (data, flag)) in enumerate(sorted(made_images().items())):
    label = ('cat', 'dog')[index % 2]
    (root / label).mkdir(parents=True, exist_ok=True)
    (root / label / name).write_bytes(data)
    flags[f'{label}/{name}'] = flag
  return root, flags


def test_the_flags_are_those_image_quality_raises():
  assert option_table.QUALITY_FLAGS == image_quality.FLAGS


@pytest.fixture(scope='module')
def converted(photos, tmp_path_factory):
  """The made images converted with --incremental, whose catalog keeps each record's flags:
  (output, the catalog's entries by path under the input, what the command printed)."""
  root, _ = photos
  out = tmp_path_factory.mktemp('quality-out') / 'out'
  with pytest.MonkeyPatch.context() as patch:
    printed = io.StringIO()
    patch.setattr('sys.stdout', printed)
    assert convert(f'--input={root}', f'--output={out}', '--splits=train=0.5,validation=0.5', '--incremental') == 0
  entries = [catalog_entries.parse(line) for path in sorted((out / 'catalog').glob('*.jsonl'))
             for line in path.read_text().splitlines()]
  return out, {entry.uri.split('/in/')[-1]: entry for entry in entries}, printed.getvalue()


def test_each_flag_is_counted_per_split_and_class_said_in_the_summary_and_listed_by_inspect(photos, converted):
  """Every made image raises its flag (and may raise others: a washed-out image has no edges),
  no ordinary photo raises any, and the record's counts are the catalog's."""
  _, flags = photos
  out, raised, said = converted
  assert sorted(raised) == sorted(flags)
  for path, flag in flags.items():
    assert (flag in raised[path].quality) if flag else raised[path].quality == (), (path, raised[path].quality)
  counted: Dict[str, Dict[str, Dict[str, int]]] = {}
  for entry in raised.values():
    for flag in entry.quality:
      per_class = counted.setdefault(entry.split, {}).setdefault(flag, {})
      per_class[entry.label] = per_class.get(entry.label, 0) + 1
  info, _ = read_output(str(out))
  assert {name: split['quality'] for name, split in info['splits'].items() if 'quality' in split} == counted
  assert 'Worth a look, by their data-quality flags: ' in said
  glance = '\n'.join(overview.glance(RunRecord.read(str(out)), str(out)))
  assert 'Data-quality flags (images stored; worth a look), by split and class:' in glance
  dark = next(path for path in flags if path.endswith('/dark.png'))
  in_split = counted[raised[dark].split]['dark']
  assert f'  {raised[dark].split}: dark {sum(in_split.values())}: ' in glance


def test_reject_quality_rejects_the_flags_it_names_and_keeps_the_rest(photos, converted, tmp_path):
  root, flags = photos
  _, raised, _ = converted
  out = tmp_path / 'out'
  assert convert(f'--input={root}', f'--output={out}', '--reject_quality=dark,blurry', '--max_error_fraction=0.6') == 0
  info, records = read_output(str(out))
  written = sorted(record['image/filename'].decode().split('/in/')[-1] for values in records.values()
                   for record in values)
  errors = [json.loads(line) for line in (out / info['errors_file']).read_text().splitlines()]
  rejected = sorted(error['uri'].split('/in/')[-1] for error in errors)
  assert rejected == sorted(path for path, entry in raised.items() if {'dark', 'blurry'} & set(entry.quality))
  assert {'cat/dark.png', 'dog/blurry.png'} & set(rejected) and not any('ordinary' in path for path in rejected)
  assert sorted(written + rejected) == sorted(flags), 'every file written or rejected, once'
  assert {error['reason'] for error in errors} == {'poor_quality'}
  assert all('--reject_quality=blurry,dark' in error['detail'] for error in errors)
  assert info['errors_by_reason'] == {'poor_quality': len(rejected)}
  assert info['options']['reject_quality'] == ['blurry', 'dark']


def test_an_unknown_flag_is_refused_before_any_work(tmp_path, capsys):
  assert convert(f'--input={tmp_path}', f'--output={tmp_path}/out', '--reject_quality=dim') == 2
  assert '--reject_quality=dim: give some of dark, light, blurry' in capsys.readouterr().err
  assert not (tmp_path / 'out').exists()
