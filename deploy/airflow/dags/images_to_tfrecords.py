"""Three DAGs that turn an image collection into TFRecords with beam_pipeline.

``images_to_tfrecords`` runs ``python -m beam_pipeline`` with Airflow's Beam operator,
on the Airflow worker (DirectRunner) or on Dataflow (DataflowRunner), by the param
``runner``. ``images_to_tfrecords_flex`` launches the Flex Template built from
deploy/dataflow (see deploy/README.md). ``images_to_tfrecords_daily`` runs every day into one
output with --incremental: each run converts only the photos added, changed or deleted
since the day before (the param ``rebuild`` converts everything again).

Params: ``input`` (a glob, directory or manifest), ``output`` (default: a directory
under the Variable ``tfrecords_output_root`` named for the run's date and time, so
a retry of a run rewrites the same output), and ``options``: any other option of
the command, as a JSON object ({"splits": "train=0.8,validation=0.2", "dedupe": true}).

The daily DAG's input and output default to the Variables ``tfrecords_daily_input`` and
``tfrecords_daily_output``, so scheduled runs need no params.

Variables: ``tfrecords_python`` (the interpreter of the environment beam_pipeline is
installed in: Airflow and TensorFlow cannot share one), ``tfrecords_output_root``,
``tfrecords_input_root`` (optional, and recommended: the folder every input file must lie
in, passed as --input_root, which a run's ``options`` cannot override; a manifest may
otherwise name any file the worker can read), and for Dataflow ``tfrecords_project``, ``tfrecords_region``,
``tfrecords_temp_location`` (gs://...), ``tfrecords_container_image`` (the image of
deploy/dataflow/Dockerfile, which the workers start from) and, for the Flex
Template, ``tfrecords_template`` (the template file's gs:// path).
"""
import datetime
from typing import Any, Dict, Mapping

from airflow.providers.apache.beam.operators.beam import BeamRunPythonPipelineOperator
from airflow.providers.google.cloud.operators.dataflow import DataflowConfiguration, DataflowStartFlexTemplateOperator
from airflow.sdk import DAG, Param

JOB_NAME = 'images-to-tfrecords'
PARAMS = {
    'input': Param('', type='string', description='Images: a glob, a directory or a manifest (required).'),
    'output': Param('', type='string', description='Where to write; empty: a dated directory under '
                    'the Variable tfrecords_output_root.'),
    'options': Param({}, type='object', description='Other options of python -m beam_pipeline, e.g. '
                     '{"splits": "train=0.8,validation=0.2", "dedupe": true}.'),
}


def conversion_options(params: Mapping[str, Any], run_after: datetime.datetime, variables: Any) -> Dict[str, Any]:
  """The command's options for one run: ``options``, then input and output, and the Variable
  tfrecords_input_root, which whoever triggers a run cannot change."""
  if not params['input']:
    raise ValueError('give the param input: the images to convert (a glob, a directory or a manifest)')
  output = params['output']
  if not output:
    root = variables.get('tfrecords_output_root', '')
    if not root:
      raise ValueError('give the param output, or set the Variable tfrecords_output_root')
    output = f'{root.rstrip("/")}/{run_after:%Y%m%dT%H%M%S}'
  input_root = variables.get('tfrecords_input_root', '')
  return {**params['options'], 'input': params['input'], 'output': output,
          **({'input_root': input_root} if input_root else {})}


def daily_options(params: Mapping[str, Any], variables: Any) -> Dict[str, Any]:
  """The daily run's options: an --incremental update of one output (the Variables'
  tfrecords_daily_input and tfrecords_daily_output, unless the params give others), or with
  ``rebuild`` a conversion of everything into it."""
  daily = {**params, 'input': params['input'] or variables.get('tfrecords_daily_input', ''),
           'output': params['output'] or variables.get('tfrecords_daily_output', '')}
  if not daily['output']:
    raise ValueError('give the param output, or set the Variable tfrecords_daily_output: the one output each '
                     'daily run updates')
  options = conversion_options(daily, datetime.datetime.min, variables)
  return {**options, 'incremental': True, **({'rebuild': True} if params['rebuild'] else {})}


def dataflow_options(params: Mapping[str, Any], variables: Any) -> Dict[str, Any]:
  """What a DataflowRunner run adds: where to stage, the workers' image, and --no_wait, as
  Airflow itself waits for the job (by the id the command logs)."""
  if params['runner'] != 'DataflowRunner':
    return {}
  return {'temp_location': variables.tfrecords_temp_location,
          'sdk_container_image': variables.tfrecords_container_image, 'no_wait': True}


def template_parameters(params: Mapping[str, Any], run_after: datetime.datetime, variables: Any) -> Dict[str, str]:
  """conversion_options as a Flex Template's parameters: strings, booleans as true/false."""
  return {name: str(value).lower() if isinstance(value, bool) else str(value)
          for name, value in conversion_options(params, run_after, variables).items()}


class _BeamPythonPipeline(BeamRunPythonPipelineOperator):
  """The Beam operator, its interpreter taken from a Variable when the task runs."""
  template_fields = (*BeamRunPythonPipelineOperator.template_fields, 'py_interpreter')

  def _cast_dataflow_config(self) -> None:
    """The Dataflow configuration for a Dataflow run only. The provider (apache-beam 6.3.1) makes
    one for every run, and then warns that it "is defined but runner is different than
    DataflowRunner": every DirectRunner run's log said so. Another runner gets an empty one
    (the operator reads it for its job link), without the warning."""
    if self.runner.lower() == 'dataflowrunner':
      super()._cast_dataflow_config()
    else:
      self.dataflow_config = DataflowConfiguration(job_name=self.task_id)


MACROS = {'conversion_options': conversion_options, 'dataflow_options': dataflow_options,
          'template_parameters': template_parameters, 'daily_options': daily_options}
RUNNER = Param('DirectRunner', enum=['DirectRunner', 'DataflowRunner'])


def _convert(options: str) -> _BeamPythonPipeline:
  """The task that runs the command with the ``options`` (a template of a dict)."""
  return _BeamPythonPipeline(
      task_id='convert',
      py_interpreter='{{ var.value.tfrecords_python }}',
      py_file='beam_pipeline',
      py_options=['-m'],
      runner='{{ params.runner }}',
      default_pipeline_options=options,
      pipeline_options='{{ dataflow_options(params, var.value) }}',
      dataflow_config={'job_name': JOB_NAME, 'project_id': "{{ var.value.get('tfrecords_project', '') }}",
                       'location': "{{ var.value.get('tfrecords_region', '') }}", 'wait_until_finished': True},
  )

with DAG('images_to_tfrecords', schedule=None, catchup=False, render_template_as_native_obj=True,
         user_defined_macros=MACROS, tags=['tfrecords'], doc_md=__doc__, params={**PARAMS, 'runner': RUNNER}):
  _convert('{{ conversion_options(params, dag_run.run_after, var.value) }}')

# One run at a time: the output takes one run at a time anyway, and a second would be refused.
with DAG('images_to_tfrecords_daily', schedule='@daily', start_date=datetime.datetime(2026, 1, 1), catchup=False,
         max_active_runs=1, render_template_as_native_obj=True, user_defined_macros=MACROS, tags=['tfrecords'],
         doc_md=__doc__, params={**PARAMS, 'runner': RUNNER, 'rebuild': Param(False, type='boolean', description=(
             'Convert everything again instead of what changed since the last run.'))}):
  _convert('{{ daily_options(params, var.value) }}')

with DAG('images_to_tfrecords_flex', schedule=None, catchup=False, render_template_as_native_obj=True,
         user_defined_macros=MACROS, tags=['tfrecords'], doc_md=__doc__, params=PARAMS):
  DataflowStartFlexTemplateOperator(
      task_id='convert',
      project_id='{{ var.value.tfrecords_project }}',
      location='{{ var.value.tfrecords_region }}',
      body={'launchParameter': {
          'jobName': JOB_NAME,
          'containerSpecGcsPath': '{{ var.value.tfrecords_template }}',
          'parameters': '{{ template_parameters(params, dag_run.run_after, var.value) }}',
          'environment': {'tempLocation': '{{ var.value.tfrecords_temp_location }}',
                          'sdkContainerImage': '{{ var.value.tfrecords_container_image }}'},
      }},
      wait_until_finished=True,
  )
