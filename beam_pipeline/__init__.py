"""Turn an image collection into validated, sharded, training-ready TFRecords with Apache Beam.

``python -m beam_pipeline`` is the command; ``beam_pipeline.convert(input=..., output=...,
**options)`` the same conversion from Python. Importing the package imports neither Beam nor
TensorFlow: a conversion does, when it runs.
"""
from beam_pipeline.api import convert
from beam_pipeline.core.output.conversion_summary import ConversionSummary, SplitSummary, Submission
from beam_pipeline.core.user_errors import ConversionError
from beam_pipeline.version import __version__

__all__ = ['convert', 'ConversionError', 'ConversionSummary', 'SplitSummary', 'Submission', '__version__']
