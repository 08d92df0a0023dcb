"""The fault proxy the storage tests rely on, tested on its own: what it relays, and how it faults."""
import http.client
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from helpers import fault_proxy, gcs_emulator

BUCKET = 'proxy'
OBJECT = 'imgs/cat/cat.1.jpg'


@pytest.fixture(scope='module')
def bucket(proxy):  # pylint: disable=redefined-outer-name,unused-argument
  gcs_emulator.create_bucket(BUCKET)
  gcs_emulator.upload(BUCKET, {OBJECT: b'\xff\xd8 a photo'})
  return BUCKET


def _http(url: str, method: str, target: str, body=None, headers=None, timeout=10.0, **kwargs):
  """One request on a fresh connection: (status, headers, body)."""
  parts = urlsplit(url)
  connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
  try:
    connection.request(method, target, body=body, headers=headers or {}, **kwargs)
    response = connection.getresponse()
    return response.status, response.headers, response.read()
  finally:
    connection.close()


def test_proxy_relays_json_api_uploads_and_downloads(proxy, plan, bucket):  # pylint: disable=redefined-outer-name,unused-argument
  bucket = gcs_emulator.client().bucket(BUCKET)
  big = bytes(range(256)) * 3000  # 768,000 bytes: three resumable chunks of 256 KiB
  with bucket.blob('proxy/resumable.bin').open('wb', chunk_size=256 * 1024) as writer:  # as Beam writes
    writer.write(big)
  bucket.blob('proxy/multipart.bin').upload_from_string(b'small')
  # Resumable chunks went through the proxy: the emulator built the session URL from the Host header.
  uploads = plan.requests(lambda e: e.path.startswith('/upload/'))
  assert [e.method for e in uploads] == ['POST', 'PUT', 'PUT', 'PUT', 'POST']
  assert bucket.blob('proxy/resumable.bin').download_as_bytes() == big
  assert bucket.blob('proxy/resumable.bin').download_as_bytes(start=1000, end=1999) == big[1000:2000]
  assert bucket.blob('proxy/multipart.bin').download_as_bytes() == b'small'
  assert plan.faulted == 0 and plan.counts()['forwarded'] == len(plan.requests())

  # Byte for byte what the emulator answers (Date aside), errors included.
  emulator = f'http://{proxy.upstream_host}:{proxy.upstream_port}'
  for target, status in [(f'/download/storage/v1/b/{BUCKET}/o/proxy%2Fresumable.bin?alt=media', 200),
                         (f'/storage/v1/b/{BUCKET}/o/proxy%2Fmultipart.bin', 200),
                         (f'/storage/v1/b/{BUCKET}/o/proxy%2Fno-such-object', 404)]:
    direct, relayed = _http(emulator, 'GET', target), _http(proxy.url, 'GET', target)
    assert direct[0] == relayed[0] == status
    assert direct[2] == relayed[2]
    assert relayed[1]['Content-Length'] == str(len(relayed[2]))
    direct_headers, relayed_headers = ([(k, v) for k, v in headers.items() if k.lower() not in ('date', 'connection')]
                                       for headers in (direct[1], relayed[1]))
    assert direct_headers == relayed_headers


def test_proxy_forwards_a_chunked_request_body(proxy, plan, bucket):  # pylint: disable=redefined-outer-name,unused-argument
  parts = [b'first part, ', b'second part, ', b'x' * 100000]
  status, _, body = _http(proxy.url, 'POST', f'/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=proxy/chunked.bin',
                          body=iter(parts), headers={'Content-Type': 'application/octet-stream'},
                          encode_chunked=True)
  assert status == 200, body
  assert json.loads(body)['size'] == str(sum(map(len, parts)))
  assert gcs_emulator.download(BUCKET, 'proxy/chunked.bin') == b''.join(parts)
  assert plan.requests()[0].object_name == 'proxy/chunked.bin'


class _StreamingUpstream(BaseHTTPRequestHandler):
  """An upstream whose answers have no Content-Length: chunked (HTTP/1.1) or until close (HTTP/1.0)."""
  PARTS = [b'alpha-', b'beta-' * 1000, b'gamma']

  def do_GET(self):
    if self.path == '/chunked':
      self.protocol_version = 'HTTP/1.1'
      self.send_response(200)
      self.send_header('Transfer-Encoding', 'chunked')
      self.send_header('X-Upstream', 'kept')
      self.end_headers()
      for part in self.PARTS:
        self.wfile.write(b'%x\r\n%s\r\n' % (len(part), part))
        self.wfile.flush()
      self.wfile.write(b'0\r\n\r\n')
    else:
      self.send_response(200)
      self.send_header('X-Upstream', 'kept')
      self.end_headers()
      for part in self.PARTS:
        self.wfile.write(part)
      self.close_connection = True

  def log_message(self, *args):
    pass


def test_proxy_relays_streamed_responses_as_chunked():
  upstream = ThreadingHTTPServer(('127.0.0.1', 0), _StreamingUpstream)
  serving = threading.Thread(target=upstream.serve_forever, kwargs={'poll_interval': 0.05})
  serving.start()
  try:
    with fault_proxy.FaultProxy(f'http://127.0.0.1:{upstream.server_address[1]}') as relay:
      for path in ('/chunked', '/until-close'):
        status, headers, body = _http(relay.url, 'GET', path)
        assert (status, body, headers['X-Upstream']) == (200, b''.join(_StreamingUpstream.PARTS), 'kept')
        assert headers['Transfer-Encoding'] == 'chunked' and 'Content-Length' not in headers
      plan = relay.plan
      plan.truncate(first=1)
      with pytest.raises(http.client.IncompleteRead):
        _http(relay.url, 'GET', '/chunked')
  finally:
    upstream.shutdown()
    upstream.server_close()
    serving.join()


def test_fault_plan_is_deterministic_and_counted(proxy, plan, bucket):  # pylint: disable=redefined-outer-name,unused-argument
  media = f'/download/storage/v1/b/{BUCKET}/o/{OBJECT}?alt=media'
  metadata = f'/storage/v1/b/{BUCKET}/o/{OBJECT.replace("/", "%2F")}'
  every = plan.fail_every_nth(2, status=503, when=fault_proxy.is_media_download)
  first = plan.fail_first(1, status=429, when=fault_proxy.is_object_get)
  answers = [_http(proxy.url, 'GET', target) for target in [media, metadata, media, media, metadata, media]]
  # media #1 passes every-2nd, then is the first object GET: 429; media #2, #4: 503.
  assert [status for status, _, _ in answers] == [429, 200, 503, 200, 200, 503]
  assert (every.matched, every.fired, first.matched, first.fired) == (4, 2, 4, 1)
  counts = plan.counts()
  assert (counts['failed'], counts['forwarded'], plan.faulted) == (3, 3, 3)
  error = json.loads(answers[2][2])  # shaped like Cloud Storage's, so the client maps it to ServiceUnavailable
  assert error['error']['code'] == 503 and error['error']['errors'][0]['reason'] == 'backendError'
  assert answers[2][1]['Content-Type'].startswith('application/json')

  plan.reset()
  plan.slow(0.5, first=1)
  with pytest.raises(TimeoutError):  # socket.timeout: what a client with a shorter timeout sees
    _http(proxy.url, 'GET', metadata, timeout=0.1)
  plan.drop(first=1)
  with pytest.raises(http.client.RemoteDisconnected):
    _http(proxy.url, 'GET', metadata)
  assert _http(proxy.url, 'GET', metadata)[0] == 200
  # The slow request ends (and is logged) on its own thread, after its delay: wait for its entry.
  plan.wait_until(lambda: len(plan.requests()) == 3)
  outcomes = {e.fault: e.outcome for e in plan.requests()}
  # Its client gave up, so relaying its answer usually fails (aborted); the kernel may still
  # take the first write before the client's reset arrives (forwarded).
  slowed = outcomes.pop('delay 0.5s')
  assert outcomes == {'drop': 'dropped', '': 'forwarded'} and slowed in ('aborted', 'forwarded'), outcomes
  assert plan.counts()['delayed'] == 1


def test_proxy_stops_cleanly_with_open_connections():
  baseline = {t for t in threading.enumerate()}
  relay = fault_proxy.FaultProxy('http://127.0.0.1:9')  # nothing listens: answers are 502s
  with relay:
    parts = urlsplit(relay.url)
    idle = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    idle.request('GET', '/')
    response = idle.getresponse()
    assert response.status == 502 and response.getheader('Connection') is None  # kept alive
    response.read()
    slow = relay.plan.slow(3600)  # a request stuck in a long delay
    stuck = socket.create_connection((parts.hostname, parts.port))
    stuck.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
    relay.plan.wait_until(lambda: slow.fired == 1)  # the proxy read it and is in its delay
    started = time.monotonic()
  # The stuck request would wait an hour: stopping does not wait for it (the bound only catches that).
  assert time.monotonic() - started < 60
  assert {t for t in threading.enumerate()} - baseline == set()
  assert stuck.recv(100) == b''  # closed without an answer
  stuck.close()
  idle.close()
  with pytest.raises(ConnectionRefusedError):
    socket.create_connection((parts.hostname, parts.port), timeout=1)
  assert relay.plan.counts()['upstream_error'] == 1 and relay.plan.counts()['aborted'] == 1
