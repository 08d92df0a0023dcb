"""How counts, rates and sizes are written for people: a noun that agrees with its count, rates
that never round to 0, and sizes in binary units (MiB, KiB), which is what --target_shard_mb and
--max_file_mb mean."""


def noun(count: int, singular: str, plural: str = '') -> str:
  """``singular`` for a count of one, else ``plural`` (default: singular + 's')."""
  return singular if count == 1 else plural or singular + 's'


def counted(count: int, singular: str, plural: str = '') -> str:
  """'1 example', '2 examples', '12,000 examples'."""
  return f'{count:,} {noun(count, singular, plural)}'


def binary_size(num_bytes: int) -> str:
  """'1.5 MiB' from a mebibyte up, else '12 KiB'."""
  return f'{num_bytes / 2**20:.1f} MiB' if num_bytes >= 2**20 else f'{num_bytes / 1024:.0f} KiB'


def rate(per_second: float, unit: str) -> str:
  """'512 images/s', '3.4 images/s', '0.3 images/s', '<0.1 images/s': a slow run of large images
  must not read as stalled, so below 10 a rate keeps one decimal and a non-zero rate never shows
  as 0."""
  if per_second >= 9.95:
    return f'{per_second:,.0f} {unit}/s'
  if 0 < per_second < 0.05:
    return f'<0.1 {unit}/s'
  return f'{per_second:.1f} {unit}/s'
