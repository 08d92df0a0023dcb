"""Whether an --incremental run updates the dataset its output holds or converts everything.

An update converts only what changed and leaves the other shards as they are, so it is
only right where today's options would have made those shards: an earlier complete
dataset written with --incremental (it has a catalog), by the options that shape what a
record holds and where it goes. Anything else is converted whole, in the incremental
layout, and the run says why in one line.
"""
from typing import Dict, List, Mapping, NamedTuple, Optional

from beam_pipeline.core import option_table
from beam_pipeline.core.output import incremental_catalog, run_totals
from beam_pipeline.core.output.run_record import RunRecord, Update
from beam_pipeline.core.settings import Settings

# Options whose value the update does not depend on, though they change what a run writes:
# the input, whose files are compared one by one (earlier_input.py checks it is the same).
_COMPARED_ELSEWHERE = frozenset({'input', 'incremental'})


class Decision(NamedTuple):
  """The earlier dataset an --incremental run updates, or why it converts everything."""
  earlier: Optional[RunRecord]
  full_conversion: Optional[str] = None  # one line, for the console and the run record

  @property
  def base(self) -> Dict[str, int]:
    """How many shards each split holds already: new shards are numbered after them."""
    return {name: len(split.shards) for name, split in self.earlier.splits.items()} if self.earlier else {}


def decide(earlier: Optional[RunRecord], settings: Settings) -> Decision:
  """What an --incremental run into an output whose run record is ``earlier`` (None: no complete
  dataset) does."""
  if earlier is None:
    return Decision(None, 'the output holds no complete dataset yet')
  if not earlier.options.get('incremental'):
    return Decision(None, 'the output was not written with --incremental (it has no catalog)')
  differing = changed_options(earlier.options, settings)
  if differing:
    return Decision(None, f'{", ".join("--" + name for name in differing)} differ from the earlier run\'s')
  if earlier.embedding and settings.embedding and earlier.embedding.sha256 != settings.embedding.sha256:
    return Decision(None, f'--embedding_model {settings.embedding.model} is not the model the earlier run used')
  return Decision(earlier)


def changed_options(recorded: Dict[str, object], settings: Settings) -> List[str]:
  """The options that change what a record holds whose value differs from ``recorded``'s (an
  earlier run record's options)."""
  today = option_table.recorded(settings)
  return [option.name for option in option_table.OPTIONS
          if option.changes_output and option.record and option.name not in _COMPARED_ELSEWHERE
          and _normal(today.get(option.name)) != _normal(recorded.get(option.name))]


def update(decision: Decision, changes: Mapping[str, int], written: run_totals.WrittenTotals,
           dataset: run_totals.WrittenTotals, labels: List[str]) -> Update:
  """What the run record of an --incremental run says it changed: ``changes`` counts its inputs
  by what became of them (incremental_catalog.change), ``written`` is what it wrote, ``dataset``
  the whole dataset after it, with its ``labels``."""
  shards = sum(len(split.shards) for split in dataset.splits.values())
  new = sum(len(split.shards) for split in written.splits.values()) - len(written.replaced_files)
  earlier = decision.earlier.labels if decision.earlier else []
  return Update(added=changes.get(incremental_catalog.ADDED, 0) if decision.earlier else dataset.num_examples,
                changed=changes.get(incremental_catalog.CHANGED, 0),
                removed=changes.get(incremental_catalog.REMOVED, 0),
                unchanged=changes.get(incremental_catalog.UNCHANGED, 0),
                shards_written=new, shards_rewritten=len(written.replaced_files),
                shards_kept=shards - new - len(written.replaced_files),
                new_classes=labels[len(earlier):] if decision.earlier else [],
                full_conversion=decision.full_conversion)


def _normal(value: object) -> object:
  """A recorded value as JSON gives it back: what is not recorded is not given (False, None)."""
  return None if value is False else value
