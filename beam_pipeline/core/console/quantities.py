"""How counts and sizes are written for people: a noun that agrees with its count, and sizes
in binary units (MiB, KiB), which is what --target_shard_mb and --max_file_mb mean."""


def noun(count: int, singular: str, plural: str = '') -> str:
  """``singular`` for a count of one, else ``plural`` (default: singular + 's')."""
  return singular if count == 1 else plural or singular + 's'


def counted(count: int, singular: str, plural: str = '') -> str:
  """'1 example', '2 examples', '12,000 examples'."""
  return f'{count:,} {noun(count, singular, plural)}'


def binary_size(num_bytes: int) -> str:
  """'1.5 MiB' from a mebibyte up, else '12 KiB'."""
  return f'{num_bytes / 2**20:.1f} MiB' if num_bytes >= 2**20 else f'{num_bytes / 1024:.0f} KiB'
