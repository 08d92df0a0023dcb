"""The DoFns driven directly, without a runner: what they hold and when they emit."""
import random

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.utils.windowed_value import WindowedValue

from beam_pipeline import options, transforms
from beam_pipeline.inputs import InputItem
from beam_pipeline.sample_images import encode, synthetic_photo


def test_validation_decodes_chunks_of_bounded_bytes_while_reading_the_next(tmp_path):
  """Ten 1-chunk images: each chunk's results come out while the next is read (nine from
  process), the last from finish_bundle; a batch is never held whole."""
  rng = random.Random(0)
  items = []
  for i in range(10):
    path = tmp_path / 'cat' / f'{i}.jpg'
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(encode(synthetic_photo(rng, 64, 48), 'JPEG'))
    items.append(InputItem(str(path)))
  settings = options.validate(PipelineOptions([f'--input={tmp_path}', f'--output={tmp_path}/out']))
  validate = transforms.ValidateImages(settings)
  validate.CHUNK_BYTES = 1
  validate.setup()
  try:
    validate.start_bundle()
    from_process = list(validate.process(items))
    from_finish = list(validate.finish_bundle())
  finally:
    validate.teardown()
  assert len(from_process) == 9 and len(from_finish) == 1
  assert isinstance(from_finish[0], WindowedValue)
  uris = [record.uri for _, record in from_process] + [from_finish[0].value[1].uri]
  assert uris == [item.uri for item in items]
