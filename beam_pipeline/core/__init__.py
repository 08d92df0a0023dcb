"""The conversion's own logic, free of Beam: it runs in worker processes that never import Beam.

Decoding and validation rules, Example encoding, reading, labels, schemas, split
and shard planning, the values tasks carry and the heavy steps. The Beam side
(beam_pipeline.pipeline) hands it remote file access where it needs any.
"""
