"""The two executors of planning's steps (planner.py): Beam's, where each step is a transform of
the graph and a keyed step a shuffle (Dataflow), and one in memory, where a collection is a list
and a keyed step a dict, run inside one step of the graph (the DirectRunner, where a shuffle
spreads nothing and every stage costs the launcher a fixed amount of CPU, benchmarks/README.md,
What the whole conversion costs). Planning is described once, over either; the plain
functions its steps call are core/planning's.

A step's arguments after its function are Beam's side inputs: views (singleton, multimap)
that Beam fills in at run time, and that the memory executor gives as the values themselves.
"""
import collections
import itertools
from typing import Any, Callable, Dict, Iterable, List, Mapping, Sequence, Union

import apache_beam as beam

from beam_pipeline.pipeline import tags
from beam_pipeline.pipeline.planning import near_copy_groups
from beam_pipeline.core.planning import near_copies


class BeamSteps:
  """Planning's steps as transforms of ``pipeline``'s graph, each under its label."""

  def __init__(self, pipeline: beam.Pipeline):
    self._pipeline = pipeline

  def create(self, label: str, values: Sequence[Any]) -> beam.PCollection:
    return self._pipeline | label >> beam.Create(values)

  def map(self, label: str, items: beam.PCollection, fn: Callable[..., Any], *args: Any,
          output_type: Any = None) -> beam.PCollection:
    """``fn`` on each item, one output each.

    Args:
      label: the step's name in the graph.
      items: the collection mapped.
      fn: the function, given an item and ``args``.
      output_type: the outputs' type hint, which chooses their coder; None: Beam infers one.
    """
    return items | label >> _typed(beam.Map(fn, *args), output_type)

  def flat_map(self, label: str, items: beam.PCollection, fn: Union[Callable[..., Iterable[Any]], beam.DoFn],
               *args: Any, output_type: Any = None, outputs: Sequence[str] = (), main: str = 'main') -> Any:
    """``fn`` (a function or a DoFn) on each item, any number of outputs each.

    Args:
      label: the step's name in the graph.
      items: the collection mapped.
      fn: the function, or the DoFn whose process is called, given an item and ``args``.
      output_type: the main outputs' type hint; None: Beam infers one.
      outputs: the tags of fn's tagged outputs, which come apart, each found by its tag in the result.
      main: the name the untagged outputs are found by in the result, when there are ``outputs``.
    """
    step = beam.ParDo(fn, *args) if isinstance(fn, beam.DoFn) else beam.FlatMap(fn, *args)
    step = _typed(step, output_type)
    return items | label >> (step.with_outputs(*outputs, main=main) if outputs else step)

  def group(self, label: str, pairs: beam.PCollection, output_type: Any = None) -> beam.PCollection:
    return pairs | label >> _typed(beam.GroupByKey(), output_type)

  def combine_per_key(self, label: str, pairs: beam.PCollection, combine: Any) -> beam.PCollection:
    return pairs | label >> beam.CombinePerKey(combine)

  def flatten(self, label: str, *collections_: beam.PCollection, output_type: Any = None) -> beam.PCollection:
    return collections_ | label >> _typed(beam.Flatten(), output_type)

  def batch(self, label: str, items: beam.PCollection, size: int, output_type: Any = None) -> beam.PCollection:
    """``items`` in lists of ``size`` (the last may be shorter).

    Args:
      label: the step's name in the graph.
      items: the collection batched.
      size: how many items a list holds.
      output_type: the lists' type hint; None: Beam infers one.
    """
    return items | label >> _typed(beam.BatchElements(min_batch_size=size, max_batch_size=size), output_type)

  def composite(self, label: str, fn: Callable[..., Any], items: beam.PCollection, *args: Any) -> Any:
    """``fn(steps, items, *args)``, its steps labelled under ``label``, as a PTransform's are."""
    return items | label >> _Composite(fn, args)

  @staticmethod
  def singleton(items: beam.PCollection, default: Any = None) -> Any:
    if default is None:
      return beam.pvalue.AsSingleton(items)
    return beam.pvalue.AsSingleton(items, default_value=default)

  @staticmethod
  def multimap(pairs: beam.PCollection) -> Any:
    return beam.pvalue.AsMultiMap(pairs)

  def summed_up(self, label: str, items: beam.PCollection, combine_fn: beam.CombineFn) -> Any:
    """``combine_fn``'s one value of all of ``items``, as a side input. CombineGlobally would
    make an empty input's value by a branch of its own (a Create, a side input, three more
    ParDos), which every run pays for, however small; the side input's default is that value
    for free."""
    return self.singleton(items | label >> beam.CombineGlobally(combine_fn).without_defaults(),
                          default=combine_fn.apply([]))

  def near_copies(self, hashes: beam.PCollection, distance: beam.PCollection, cap: beam.PCollection
                  ) -> Dict[str, beam.PCollection]:
    """Lists of (source_sha256, phash, priority, colour) to near_copy_groups.NearCopies's output, by its
    bounded shuffles."""
    return near_copy_groups.grouped(hashes, distance, cap, one_machine=False)


class _Composite(beam.PTransform):
  def __init__(self, fn: Callable[..., Any], args: Sequence[Any]):
    super().__init__()
    self._fn = fn
    self._args = args

  def expand(self, items):
    return self._fn(BeamSteps(items.pipeline), items, *self._args)


def _typed(step: beam.PTransform, output_type: Any) -> beam.PTransform:
  return step if output_type is None else step.with_output_types(output_type)


class InMemorySteps:
  """Planning's steps on lists, one after the other, each over every item: a keyed step is a
  dict of lists, a side input the value itself."""

  def create(self, label: str, values: Sequence[Any]) -> List[Any]:
    return list(values)

  def map(self, label: str, items: List[Any], fn: Callable[..., Any], *args: Any, output_type: Any = None
          ) -> List[Any]:
    """BeamSteps.map's outputs, as a list.

    Args:
      label: unused: the step's name where it is a transform.
      items: the list mapped.
      fn: the function, given an item and ``args``.
      output_type: unused: where it is a transform, the outputs' type hint.
    """
    return [fn(item, *args) for item in items]

  def flat_map(self, label: str, items: List[Any], fn: Union[Callable[..., Iterable[Any]], beam.DoFn], *args: Any,
               output_type: Any = None, outputs: Sequence[str] = (), main: str = 'main') -> Any:
    """BeamSteps.flat_map's outputs: a list, or with ``outputs`` a dict of lists by tag.

    Args:
      label: unused: the step's name where it is a transform.
      items: the list mapped.
      fn: the function, or the DoFn whose process is called, given an item and ``args``.
      output_type: unused: where it is a transform, the main outputs' type hint.
      outputs: the tags of fn's tagged outputs, each a list of the result.
      main: the key of the untagged outputs' list in the result, when there are ``outputs``.
    """
    if isinstance(fn, beam.DoFn):
      fn = fn.process
    produced = (out for item in items for out in fn(item, *args))
    if not outputs:
      return list(produced)
    apart: Dict[str, List[Any]] = {tag: [] for tag in (main, *outputs)}
    for out in produced:
      if isinstance(out, beam.pvalue.TaggedOutput):
        apart[out.tag].append(out.value)
      else:
        apart[main].append(out)
    return apart

  def group(self, label: str, pairs: Iterable[Any], output_type: Any = None) -> List[Any]:
    grouped: Dict[Any, List[Any]] = collections.defaultdict(list)
    for key, value in pairs:
      grouped[key].append(value)
    return list(grouped.items())

  def combine_per_key(self, label: str, pairs: Iterable[Any], combine: Any) -> List[Any]:
    apply = combine.apply if isinstance(combine, beam.CombineFn) else combine
    return [(key, apply(values)) for key, values in self.group(label, pairs)]

  def flatten(self, label: str, *collections_: List[Any], output_type: Any = None) -> List[Any]:
    return list(itertools.chain.from_iterable(collections_))

  def batch(self, label: str, items: List[Any], size: int, output_type: Any = None) -> List[Any]:
    """``items`` in lists of ``size``, as BeamSteps.batch makes them.

    Args:
      label: unused: the step's name where it is a transform.
      items: the list batched.
      size: how many items a list holds.
      output_type: unused: where it is a transform, the lists' type hint.
    """
    return [items[start:start + size] for start in range(0, len(items), size)]

  def composite(self, label: str, fn: Callable[..., Any], items: List[Any], *args: Any) -> Any:
    return fn(self, items, *args)

  @staticmethod
  def singleton(items: List[Any], default: Any = None) -> Any:
    return items[0] if items else default

  @staticmethod
  def multimap(pairs: Iterable[Any]) -> Mapping[Any, List[Any]]:
    return _MultiMap(pairs)

  def summed_up(self, label: str, items: List[Any], combine_fn: beam.CombineFn) -> Any:
    return combine_fn.apply(items)

  def near_copies(self, hashes: List[List[Any]], distance: List[int], cap: List[int]) -> Dict[str, List[Any]]:
    """near_copy_groups.NearCopies's output, grouped in memory (near_copies.groups_on_one_machine),
    its memory growing with the hashes but never with the pairs of them that are close."""
    found = near_copies.groups_on_one_machine(itertools.chain.from_iterable(hashes), distance[0], cap[0])
    return {'pairs': found.pairs, tags.NEAR_COPIES: [found.counts]}


class _MultiMap(dict):
  """A multimap side input's view of (key, value) pairs: a key's values, none for a key without."""

  def __init__(self, pairs: Iterable[Any]):
    super().__init__()
    for key, value in pairs:
      self.setdefault(key, []).append(value)

  def __missing__(self, key: Any) -> List[Any]:
    return []

