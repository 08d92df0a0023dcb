"""The output's files: their names, the run record and its totals, TFDS's metadata, errors, the lock."""
