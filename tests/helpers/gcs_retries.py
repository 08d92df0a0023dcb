"""Cloud Storage retries made short, for tests whose faults must reach the code under test fast."""
from apache_beam.io.gcp import gcsio_retry
from google.cloud.storage import retry as storage_retry


def shorten_gcs_retries(monkeypatch, timeout: float, initial: float = 0.02, maximum: float = 0.1,
                        metadata_too: bool = False) -> None:
  """Makes google-cloud-storage give up after ``timeout`` seconds instead of 120 s.

  Beam's GcsIO looks its Retry object up in apache_beam.io.gcp.gcsio_retry each time it
  is created (gcsio_retry.get_retry), and passes it to every call it makes, so
  replacing the two module attributes with copies (Retry.with_timeout/with_delay, the
  public API) covers media downloads, listing and writes. ``timeout=0`` makes exactly
  one attempt per call: every failure then reaches read_file.

  BeamBlobReader.__init__ also calls ``blob.reload()`` (the object's metadata GET)
  without a retry argument, so that GET uses google-cloud-storage's DEFAULT_RETRY,
  bound as a default argument when the module was imported; no module attribute
  reaches it. ``metadata_too`` therefore changes that shared instance in place
  (private attributes, restored by monkeypatch).
  """
  for name in ('DEFAULT_RETRY_WITH_THROTTLING_COUNTER', 'DEFAULT_RETRY'):
    original = getattr(gcsio_retry, name)
    monkeypatch.setattr(gcsio_retry, name,
                        original.with_timeout(timeout).with_delay(initial=initial, maximum=maximum))
  if metadata_too:
    for attribute, value in (('_timeout', timeout), ('_initial', initial), ('_maximum', maximum)):
      monkeypatch.setattr(storage_retry.DEFAULT_RETRY, attribute, value)
