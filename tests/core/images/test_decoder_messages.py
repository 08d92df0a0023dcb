"""core/images/decoder_messages.py: what the decoders printed, quoted alike however often an image decodes."""
from beam_pipeline.core.images import decoder_messages

SAID = '\n'.join([
    'E0000 00:00:1796557983.344021   30956 cuda_platform.cc:52] failed call to cuInit: UNKNOWN ERROR (303)',
    'E0000 00:00:1796557984.152707   30966 jpeg_mem.cc:331] Premature end of JPEG data. Stopped at line 12/55',
    'Corrupt JPEG data: 4 extraneous bytes before marker 0xd9',
    'W0000 00:00:1796542481.328831    3411 png_io.cc:96] PNG warning: iCCP: known incorrect sRGB profile'])


def test_tensorflow_s_log_lines_lose_their_time_and_thread_and_only_its_decoders_count():
  """The same image decoded twice prints the same lines; TensorFlow's set-up does not count
  (TF_CPP_MIN_LOG_LEVEL below 3 lets both through)."""
  assert decoder_messages.lines(SAID) == [
      'Premature end of JPEG data. Stopped at line 12/55', 'Corrupt JPEG data: 4 extraneous bytes before marker 0xd9',
      'PNG warning: iCCP: known incorrect sRGB profile']
  again = SAID.replace('1796557984.152707   30966', '1796557999.000001   31000')
  assert decoder_messages.lines(again) == decoder_messages.lines(SAID)
  assert decoder_messages.one_line(SAID.splitlines()[0]) == ''
  assert decoder_messages.one_line(SAID).startswith('Premature end of JPEG data. Stopped at line 12/55 / Corrupt')
