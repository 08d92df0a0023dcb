"""The tags of the steps' extra outputs, and the metrics they report, shared by every step."""
import apache_beam as beam
from apache_beam.metrics import Metrics

from beam_pipeline.core.messages import Rejection

REJECTED = 'rejected'
DUPLICATES = 'duplicates'
LABELS = 'labels'
NEAR_COPIES = 'near_copies'
TRANSFORM_WRITTEN = 'transform_written'
CATALOGUED = 'catalogued'  # (shard id, catalog entries) whose lookup lines a run writes
NAMESPACE = 'beam_pipeline'


def records_per_key(stage: str) -> Metrics.DelegatingDistribution:
  """The distribution of how many records one key of a planning GroupByKey ``stage`` holds: its
  max is what one worker gathers, which the buckets' width keeps bounded (hash_order)."""
  return Metrics.distribution(NAMESPACE, f'records_per_key_{stage}')


def rejected(rejection: Rejection) -> beam.pvalue.TaggedOutput:
  Metrics.counter(NAMESPACE, f'rejected_{rejection.reason}').inc()
  return beam.pvalue.TaggedOutput(REJECTED, rejection)
