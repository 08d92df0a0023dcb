"""``inspect --quality_sheet`` on the images test_data_quality makes to raise each flag, converted
here: the examples found are the files made to raise their flag, and the sheet draws a row per flag."""
import dataclasses
import io
from pathlib import Path
from typing import Dict, Tuple

import pytest
from PIL import Image

from beam_pipeline import cli
from beam_pipeline.core.output.run_record import Embedding, RunRecord
from beam_pipeline.inspection import quality_sheet
from helpers.commands import convert
from test_data_quality import made_images


def _converted(root: Path, out: Path, made: Dict[str, Tuple[bytes, str]]) -> Dict[str, str]:
  """``made`` written in two classes under ``root`` and converted to ``out``: each file's class by its name."""
  classes = {}
  for index, (name, (data, _)) in enumerate(sorted(made.items())):
    classes[name] = ('cat', 'dog')[index % 2]
    (root / classes[name]).mkdir(parents=True, exist_ok=True)
    (root / classes[name] / name).write_bytes(data)
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr('sys.stdout', io.StringIO())
    assert convert(f'--input={root}', f'--output={out}', '--splits=train=0.5,validation=0.5') == 0
  return classes


@pytest.fixture(scope='module')
def flagged(tmp_path_factory):
  """(output, its record, each file's class, the flag each file is made to raise)."""
  made = made_images()
  base = tmp_path_factory.mktemp('quality-sheet')
  classes = _converted(base / 'in', base / 'out', made)
  return base / 'out', RunRecord.read(str(base / 'out')), classes, {name: flag for name, (_, flag) in made.items()}


def test_the_examples_of_each_flag_are_the_files_made_to_raise_it(flagged):
  out, info, classes, made = flagged
  found = quality_sheet.examples(info, str(out), per_flag=8)
  counts = quality_sheet.counts(info)
  assert list(found) == list(counts) and {flag for flag in made.values() if flag} <= set(counts)
  assert {flag: len(examples) for flag, examples in found.items()} == counts, 'every flagged image, as counted'
  names = {flag: {example.name for example in examples} for flag, examples in found.items()}
  for name, flag in made.items():
    assert (name in names[flag]) if flag else not any(name in row for row in names.values()), (name, names)
  splits = {split: set(entry.classes) for split, entry in info.splits.items()}
  for example in (example for examples in found.values() for example in examples):
    assert example.label == classes[example.name] and example.split in splits
    assert example.image.startswith(b'\x89PNG')


def test_the_sheet_draws_a_row_per_flag_raised(flagged, tmp_path, capsys):
  out, info, _, _ = flagged
  sheet = tmp_path / 'quality.png'
  assert cli.main(['inspect', str(out), f'--quality_sheet={sheet}', '--samples=2']) == 0
  assert f'Quality sheet: {sheet}' in capsys.readouterr().out
  with Image.open(sheet) as drawn:
    assert drawn.height == 40 + len(quality_sheet.counts(info)) * quality_sheet.ROW


def test_reading_stops_at_its_bound_and_the_title_says_so(flagged):
  out, info, _, _ = flagged
  found = quality_sheet.examples(info, str(out), per_flag=8, limit=3)
  assert sum(len(examples) for examples in found.values()) < sum(quality_sheet.counts(info).values())
  assert quality_sheet.title('/out', info, found, 8, limit=3).endswith('; examples from the first 3 records only')
  everything = quality_sheet.examples(info, str(out), per_flag=8)
  assert not quality_sheet.title('/out', info, everything, 8).endswith('records only')


def test_an_output_without_flagged_images_has_no_sheet_to_draw(tmp_path, capsys):
  ordinary = {name: entry for name, entry in made_images().items() if not entry[1]}
  _converted(tmp_path / 'in', tmp_path / 'out', ordinary)
  sheet = tmp_path / 'quality.png'
  assert cli.main(['inspect', str(tmp_path / 'out'), f'--quality_sheet={sheet}']) == 2
  error = capsys.readouterr().err
  assert error.startswith(f'error: {tmp_path / "out"} counts no images with a data-quality flag')
  assert error.count('\n') == 1
  assert not sheet.exists()


def test_an_embedding_only_output_is_refused_as_for_the_contact_sheet(flagged, tmp_path, capsys):
  """Its records hold no images to measure or draw (the record is the flagged output's, marked so)."""
  _, info, _, _ = flagged
  embedding = Embedding(model='/m.keras', sha256='0' * 64, input_size=[224, 224], input='resized', output_shape=[8],
                        num_values=8, key='image/embedding', shape_key='image/embedding/shape', images_stored=False)
  marked = tmp_path / 'out'
  marked.mkdir()
  (marked / 'beam_pipeline.json').write_text(dataclasses.replace(info, embedding=embedding).to_json(), encoding='utf-8')
  sheet = tmp_path / 'quality.png'
  assert cli.main(['inspect', str(marked), f'--quality_sheet={sheet}']) == 2
  assert capsys.readouterr().err == (f'error: {marked} stores embeddings instead of images (--embedding_only): '
                                     'there are no images to draw; leave out --quality_sheet\n')
  assert not sheet.exists()
