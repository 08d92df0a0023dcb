"""``inspect --plots`` on a record of many size bins: every tick label readable."""
from beam_pipeline.core.messages import ShardReport
from beam_pipeline.core.output import run_totals
from beam_pipeline.inspection import plots


def _record():
  """Images of every power of two from 16 px to 16,384 px, and of 1 KiB to 1 GiB stored."""
  labels = ['cat', 'dog']
  sides, sizes = [2 ** k for k in range(4, 15)], [2 ** k for k in range(10, 31)]
  count = max(len(sides), len(sizes))
  report = ShardReport(split='train', file='train-00000-of-00001.tfrecord', num_examples=count, num_bytes=1,
                       **run_totals.image_statistics([labels[i % 2] for i in range(count)],
                                                     [sides[i % len(sides)] for i in range(count)], sizes))
  return run_totals.build(written=run_totals.written_totals([report]), labels=labels, errors_by_reason={},
                          num_errors_files=1, duplicates={'num_groups': 0, 'num_extra_copies': 0, 'groups': []},
                          dedupe=False, num_removed=0,
                          settings={'input': '/in/**', 'input_kind': 'directory', 'output': '/out', 'schema': 'default',
                                    'compression': 'none'}, runner='DirectRunner')


def test_the_size_histograms_labels_do_not_overlap():
  """21 stored-size bins ('512 KiB-1 MiB' beside '1-2 MiB') once drew their labels over each other."""
  figure = plots.plotted(_record(), 'title')
  renderer = figure.canvas.get_renderer()
  for axes in figure.axes:
    boxes = [label.get_window_extent(renderer) for label in axes.get_xticklabels() if label.get_text()]
    assert len(boxes) > 1
    assert all(left.x1 <= right.x0 + 1 or not left.overlaps(right) for left, right in zip(boxes, boxes[1:])), (
        axes.get_title())
