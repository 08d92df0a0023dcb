"""What convert() returns: a completed run's summary as typed values (the same numbers the
command prints, and --json gives), or the line a run that ended at submission ends with."""
import copy
import dataclasses
from typing import Any, Dict, List, Mapping, Optional

from beam_pipeline.core import uris


@dataclasses.dataclass(frozen=True)
class SplitSummary:
  """One split as written: its examples, bytes, shards (their paths) and examples per class."""
  num_examples: int
  num_bytes: int
  num_shards: int
  classes: Dict[str, int]
  files: List[str]
  objects: Optional[Dict[str, int]] = None  # objects per class, with --annotations


@dataclasses.dataclass(frozen=True)
class ConversionSummary:
  """A completed conversion: where it went, what it wrote and rejected, how fast. ``str()`` is
  the summary as the command prints it; ``as_dict()`` as --json prints it, every count included
  (duplicates, damaged JPEGs, the embedding model)."""
  output: str
  num_inputs: int
  num_examples: int
  num_classes: int
  splits: Dict[str, SplitSummary]
  num_errors: int
  errors_by_reason: Dict[str, int]
  errors_file: str  # the errors files' path (a glob when there are several): one JSON line per rejected input
  num_skipped: int  # files of a folder or glob that are no images (.DS_Store, notes.txt), listed in the errors file
  wall_seconds: Optional[float]
  images_per_second: Optional[float]
  text: str = dataclasses.field(repr=False)
  data: Dict[str, Any] = dataclasses.field(repr=False)

  @classmethod
  def of(cls, data: Mapping[str, Any], text: str) -> 'ConversionSummary':
    """The summary of ``data`` (inspection/summary.of's, as --json prints it) and its ``text``."""
    splits = {name: SplitSummary(split['num_examples'], split['num_bytes'], split['num_shards'], dict(split['classes']),
                                 [uris.join(data['output'], shard['file']) for shard in split['shards']],
                                 split.get('objects'))
              for name, split in data['splits'].items()}
    return cls(data['output'], data['num_inputs'], data['num_examples'], data['num_classes'], splits,
               data['num_errors'], dict(data['errors_by_reason']), data['errors_file'], data.get('num_skipped', 0),
               data.get('wall_seconds'),
               data.get('images_per_second'), text, copy.deepcopy(dict(data)))

  def as_dict(self) -> Dict[str, Any]:
    """The summary as --json prints it."""
    return copy.deepcopy(self.data)

  def __str__(self) -> str:
    return self.text

  def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython and Jupyter show the command's summary
    printer.text('ConversionSummary(...)' if cycle else self.text)


@dataclasses.dataclass(frozen=True)
class Submission:
  """A run that ended at submission: a dry run, a classic template, or a Dataflow job not waited
  for (no_wait=True). ``message`` is the line the command ends with (where a dry run's job went)."""
  message: str

  def __str__(self) -> str:
    return self.message
