"""Counts and sizes as people read them."""
from beam_pipeline.core.console import quantities


def test_a_noun_agrees_with_its_count():
  assert [quantities.counted(n, 'example') for n in (0, 1, 2, 12000)] == [
      '0 examples', '1 example', '2 examples', '12,000 examples']
  assert quantities.counted(1, 'duplicate copy', 'duplicate copies') == '1 duplicate copy'
  assert quantities.counted(3, 'class', 'classes') == '3 classes'


def test_sizes_are_binary_units():
  assert quantities.binary_size(150 * 2**20) == '150.0 MiB'
  assert quantities.binary_size(2**20 - 1) == '1024 KiB'
  assert quantities.binary_size(3 * 1024) == '3 KiB'


def test_a_rate_keeps_a_decimal_below_ten_and_never_rounds_to_zero():
  assert [quantities.rate(r, 'images') for r in (1200.4, 10, 9.96, 9.94, 0.3, 0.05, 0.049, 0.0)] == [
      '1,200 images/s', '10 images/s', '10 images/s', '9.9 images/s', '0.3 images/s', '0.1 images/s',
      '<0.1 images/s', '0.0 images/s']
