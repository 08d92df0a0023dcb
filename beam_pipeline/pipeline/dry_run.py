"""What a dry run (--dry_run=True) leaves behind: the job DataflowRunner translated, in a local
folder, so the job can be looked at (or diffed against another) without credentials, network
or a submission."""
import json
import os
import tempfile
from typing import Optional

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineResult

# The folder's files: Beam's portable pipeline, which Dataflow runs (it stages the same as
# pipeline.pb); the Dataflow job request as far as a dry run builds it; the job's options.
PIPELINE = 'pipeline.pb'
JOB = 'job.json'
OPTIONS = 'pipeline_options.json'


def write(result: PipelineResult, options: PipelineOptions) -> Optional[str]:
  """Writes the translated job of a dry run's ``result`` to a new local folder; returns its path,
  or None for a runner that hands back no job."""
  job = getattr(result, 'job', None)  # DataflowRunner's dry run hands back its job, translated and unsubmitted
  if job is None:
    return None
  folder = tempfile.mkdtemp(prefix='beam_pipeline-dry-run-')
  with open(os.path.join(folder, PIPELINE), 'wb') as f:
    f.write(job.proto_pipeline.SerializeToString())
  with open(os.path.join(folder, JOB), 'w', encoding='utf-8') as f:
    f.write(job.json() + '\n')
  with open(os.path.join(folder, OPTIONS), 'w', encoding='utf-8') as f:
    json.dump(options.get_all_options(drop_default=True), f, indent=2, sort_keys=True, default=str)
    f.write('\n')
  return folder
