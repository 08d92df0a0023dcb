"""``inspect --plots``: the class balance per split, and histograms of image sizes, in one PNG.

Drawn from beam_pipeline.json alone (its per-split class counts and size
histograms), with matplotlib.
"""
import matplotlib

matplotlib.use('Agg')  # files only: no display here, nor on a server
from matplotlib import pyplot  # noqa: E402  pylint: disable=wrong-import-position

from beam_pipeline.core.output.run_record import RunRecord  # noqa: E402  pylint: disable=wrong-import-position
from beam_pipeline.inspection import overview  # noqa: E402  pylint: disable=wrong-import-position

MAX_CLASSES = 60


def draw(info: RunRecord, path: str, title: str) -> None:
  """Writes the figure to ``path``."""
  figure = plotted(info, title)
  figure.savefig(path, dpi=100)
  pyplot.close(figure)


def plotted(info: RunRecord, title: str) -> 'matplotlib.figure.Figure':
  """The figure: as wide as its classes and size bins need, the bins' labels upright so that
  neighbours never overlap ('512 KiB-1 MiB' beside '1-2 MiB')."""
  splits = info.splits
  labels = info.labels[:MAX_CLASSES]
  bins = max([len(getattr(split, field)) for split in splits.values() for field in ('longer_side_px', 'kib')] + [0])
  figure, (balance, sides, sizes) = pyplot.subplots(3, 1, figsize=(max(8, 0.35 * len(labels) + 3, 0.6 * bins + 2),
                                                                   11))
  figure.suptitle(title)
  width = 0.8 / max(len(splits), 1)
  for offset, (name, split) in enumerate(splits.items()):
    positions = [index + offset * width for index in range(len(labels))]
    balance.bar(positions, [split.classes.get(label, 0) for label in labels], width, label=name)
  balance.set_xticks([index + 0.4 - width / 2 for index in range(len(labels))], labels, rotation=60, ha='right')
  balance.set_title('examples per class' + (f' (first {MAX_CLASSES} classes)' if len(info.labels) > MAX_CLASSES
                                           else ''))
  for axes, field, unit in ((sides, 'longer_side_px', 'px'), (sizes, 'kib', 'KiB')):
    edges = sorted({int(edge) for split in splits.values() for edge in getattr(split, field)})
    for offset, (name, split) in enumerate(splits.items()):
      axes.bar([index + offset * width for index in range(len(edges))],
               [getattr(split, field).get(str(edge), 0) for edge in edges], width, label=name)
    axes.set_xticks([index + 0.4 - width / 2 for index in range(len(edges))],
                    [overview.bin_label(str(edge), unit) for edge in edges], rotation=90)
    axes.set_ylabel('images')
  sides.set_title('images by longer side')
  sizes.set_title('images by stored size')
  for axes in (balance, sides, sizes):
    if len(splits) > 1:
      axes.legend()
  figure.tight_layout()
  return figure
