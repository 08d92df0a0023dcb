"""Turn an image collection into validated, sharded, training-ready TFRecords with Apache Beam."""
__version__ = '0.2.0'
