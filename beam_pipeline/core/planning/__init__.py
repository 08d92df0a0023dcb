"""Splits and shards planned on metadata alone, bucket by bucket."""
