"""A small HTTP reverse proxy that injects faults, for tests: real sockets, no mocks, no randomness.

Put it between the code under test and the Cloud Storage emulator (``gcs_emulator``)
and point STORAGE_EMULATOR_HOST at ``proxy.url``::

    with FaultProxy(emulator_url) as proxy:
      proxy.plan.fail_every_nth(3, status=503, when=is_media_download)
      ...  # code under test talks to proxy.url
      assert proxy.plan.counts()['failed'] > 0

Every request is read whole (method, target, headers, body; a chunked request body
is de-chunked and forwarded with a Content-Length), then the ``FaultPlan`` decides,
atomically and deterministically, whether to fault it:

- answer with an error status instead of forwarding (a Cloud Storage style JSON
  error body, so google-cloud-storage maps it to e.g. ServiceUnavailable);
- delay it first ("slow"), then forward or fail it;
- drop the connection without answering (the client sees RemoteDisconnected);
- forward it and cut the response body in half (the client sees IncompleteRead).

Otherwise the request goes to the upstream unchanged (including the Host header,
so URLs the emulator builds from it, such as a resumable upload's Location, point
back at the proxy) on a fresh connection, and the response is relayed as it
streams: status, reason, headers and body, with Content-Length preserved, or
re-chunked when the upstream gave none. Hop-by-hop headers are not relayed.

Requests are classified from the JSON API, media download and upload paths the
google-cloud-storage client uses (``ProxyRequest.object_name``, ``is_media_download``);
the XML API is forwarded but not recognised. An upstream that cannot be reached is
answered 502 (outcome ``upstream_error``).

Towards its clients the proxy speaks HTTP/1.1 with keep-alive (google-cloud-storage
pools connections). ``stop()`` (or leaving the ``with`` block) closes the listening
socket and every open client connection and joins every thread it started.
"""
import dataclasses
import http.client
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Dict, Iterator, List, Optional, Tuple
from urllib.parse import parse_qs, unquote, urlsplit

_HOST = '127.0.0.1'
_CHUNK = 64 * 1024
# RFC 9110 section 7.6.1, plus the obsolete Proxy-Connection some clients still send.
_HOP_BY_HOP = frozenset({'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization',
                         'proxy-connection', 'te', 'trailer', 'trailers', 'transfer-encoding', 'upgrade'})
# /storage/v1/b/B/o/NAME (JSON API), /download/storage/v1/b/B/o/NAME (media),
# /upload/storage/v1/b/B/o?name=NAME (uploads; multipart/resumable uploads name the
# object in the body instead).
_OBJECT_PATH = re.compile(r'^(?:/download|/upload)?/storage/v1/b/(?P<bucket>[^/]+)/o(?:/(?P<object>[^?]+))?$')
# Reasons Cloud Storage gives with these codes, for error bodies that look real.
_REASONS = {429: 'rateLimitExceeded', 500: 'internalError', 502: 'badGateway', 503: 'backendError',
            504: 'gatewayTimeout', 408: 'requestTimeout'}


@dataclasses.dataclass(frozen=True)
class ProxyRequest:
  """One request as the proxy received it."""
  method: str
  target: str  # path and query, as sent
  headers: Tuple[Tuple[str, str], ...]
  body: bytes

  @property
  def path(self) -> str:
    return urlsplit(self.target).path

  @property
  def query(self) -> Dict[str, List[str]]:
    return parse_qs(urlsplit(self.target).query, keep_blank_values=True)

  def header(self, name: str, default: Optional[str] = None) -> Optional[str]:
    return next((v for k, v in self.headers if k.lower() == name.lower()), default)

  @property
  def bucket(self) -> Optional[str]:
    match = _OBJECT_PATH.match(self.path)
    return unquote(match.group('bucket')) if match else None

  @property
  def object_name(self) -> Optional[str]:
    """The object a JSON API, media download or (``?name=``) upload request is about."""
    match = _OBJECT_PATH.match(self.path)
    if not match:
      return None
    if match.group('object'):
      return unquote(match.group('object'))
    names = self.query.get('name')
    return names[0] if names else None


# Predicates for ``when=``: which requests a rule looks at.
def is_media_download(request: ProxyRequest) -> bool:
  """An object's bytes (``alt=media``), as Blob.download_* and Beam's reader fetch them."""
  return request.method == 'GET' and 'media' in request.query.get('alt', [])


def is_object_get(request: ProxyRequest) -> bool:
  """Any GET of one object: its metadata (Blob.reload) or its bytes."""
  return request.method == 'GET' and request.object_name is not None


def is_upload(request: ProxyRequest) -> bool:
  return request.path.startswith('/upload/')


def any_request(request: ProxyRequest) -> bool:  # pylint: disable=unused-argument
  return True


def under_prefix(prefix: str, when: Callable[[ProxyRequest], bool] = any_request
                 ) -> Callable[[ProxyRequest], bool]:
  """``when`` for requests about objects whose name starts with ``prefix``."""
  return lambda request: (request.object_name or '').startswith(prefix) and when(request)


@dataclasses.dataclass(frozen=True)
class Fault:
  status: Optional[int] = None  # answer with this status instead of the upstream's answer
  delay: float = 0.0  # seconds to wait first ("slow"); then fail with status, or forward
  drop: bool = False  # close the connection without answering
  truncate: bool = False  # forward, but send only half the body (at least 2 bytes long), then close

  def describe(self) -> str:
    parts = [f'delay {self.delay:g}s'] if self.delay else []
    if self.status:
      parts.append(str(self.status))
    if self.drop:
      parts.append('drop')
    if self.truncate:
      parts.append('truncate')
    return '+'.join(parts) or 'none'


class Rule:
  """Faults the requests ``when`` selects: the i-th of them (from 1) if ``first`` is None or
  i <= first, and i is a multiple of ``every``. Counters are read under the plan's lock."""

  def __init__(self, fault: Fault, when: Callable[[ProxyRequest], bool], every: int, first: Optional[int],
               name: str):
    if every < 1 or (first is not None and first < 0):
      raise ValueError('every must be >= 1 and first >= 0')
    self.fault, self.when, self.every, self.first, self.name = fault, when, every, first, name
    self.matched = 0  # requests ``when`` selected
    self.fired = 0  # of those, requests faulted

  def _offer(self, request: ProxyRequest) -> bool:
    if not self.when(request):
      return False
    self.matched += 1
    fires = (self.first is None or self.matched <= self.first) and self.matched % self.every == 0
    self.fired += fires
    return fires

  def __repr__(self) -> str:
    return f'Rule({self.name}: {self.fault.describe()}, matched={self.matched}, fired={self.fired})'


@dataclasses.dataclass(frozen=True)
class LoggedRequest:
  method: str
  path: str
  query: str
  object_name: Optional[str]
  media: bool
  outcome: str  # forwarded, failed, dropped, truncated, upstream_error, aborted
  fault: str  # Fault.describe() of the rule that fired, or '' if none
  status: Optional[int]  # status sent to the client, if any


class FaultPlan:
  """Which requests to fault, and what happened to every request. Thread-safe.

  Rules are tried in the order they were added; each counts the requests it
  selects, and the first that fires decides the request's fault (later rules do not
  see that request). The same sequence of requests always gets the same faults.
  """
  OUTCOMES = ('forwarded', 'failed', 'dropped', 'truncated', 'delayed', 'upstream_error', 'aborted')

  def __init__(self):
    self._lock = threading.RLock()  # reentrant: wait_until's condition may read the plan
    self._changed = threading.Condition(self._lock)  # notified whenever a request is decided or logged
    self._rules: List[Rule] = []
    self._log: List[LoggedRequest] = []
    self._generation = 0  # which reset() a log index belongs to

  def add(self, fault: Fault, when: Callable[[ProxyRequest], bool] = any_request, every: int = 1,
          first: Optional[int] = None, name: str = '') -> Rule:
    rule = Rule(fault, when, every, first, name or fault.describe())
    with self._lock:
      self._rules.append(rule)
    return rule

  def fail_every_nth(self, n: int, status: int = 503, when: Callable[[ProxyRequest], bool] = any_request) -> Rule:
    """Fails the n-th, 2n-th, ... request that ``when`` selects."""
    return self.add(Fault(status=status), when, every=n, name=f'every {n}th -> {status}')

  def fail_first(self, k: int, status: int = 429, when: Callable[[ProxyRequest], bool] = any_request) -> Rule:
    """Fails the first k requests that ``when`` selects, then lets them through."""
    return self.add(Fault(status=status), when, first=k, name=f'first {k} -> {status}')

  def fail_object(self, name: str, status: int = 503, when: Callable[[ProxyRequest], bool] = any_request) -> Rule:
    """Always fails the requests about object ``name`` (of any bucket) that ``when`` selects."""
    return self.add(Fault(status=status), lambda r: r.object_name == name and when(r),
                    name=f'object {name} -> {status}')

  def slow(self, seconds: float, when: Callable[[ProxyRequest], bool] = any_request, every: int = 1,
           first: Optional[int] = None, status: Optional[int] = None) -> Rule:
    """Delays the selected requests, then forwards them (or fails them with ``status``)."""
    return self.add(Fault(delay=seconds, status=status), when, every, first, name=f'slow {seconds:g}s')

  def drop(self, when: Callable[[ProxyRequest], bool] = any_request, every: int = 1,
           first: Optional[int] = None) -> Rule:
    """Closes the connection of the selected requests without an answer."""
    return self.add(Fault(drop=True), when, every, first, name='drop')

  def truncate(self, when: Callable[[ProxyRequest], bool] = any_request, every: int = 1,
               first: Optional[int] = None) -> Rule:
    """Forwards the selected requests but relays only half of each response body."""
    return self.add(Fault(truncate=True), when, every, first, name='truncate')

  def reset(self) -> None:
    """Removes every rule and forgets every request."""
    with self._lock:
      self._rules.clear()
      self._log.clear()
      self._generation += 1
      self._changed.notify_all()

  def wait_until(self, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Returns once ``condition()`` (which may read the plan: its rules' counters, requests(),
    counts()) is true, re-checked whenever a request is decided or logged: an event to
    synchronise on, instead of a sleep. ``timeout`` only catches a hang."""
    with self._changed:
      if not self._changed.wait_for(condition, timeout):
        raise TimeoutError(f'the fault plan did not reach the expected state within {timeout} s: {self._log}')

  @property
  def rules(self) -> List[Rule]:
    with self._lock:
      return list(self._rules)

  def requests(self, when: Callable[[LoggedRequest], bool] = lambda entry: True) -> List[LoggedRequest]:
    """Every finished request so far, in the order they finished."""
    with self._lock:
      return [entry for entry in self._log if when(entry)]

  def counts(self) -> Dict[str, int]:
    """How many requests ended each way ('failed' counts injected error statuses only;
    'delayed' counts slowed requests, whatever happened to them next)."""
    with self._lock:
      counts = dict.fromkeys(self.OUTCOMES, 0)
      for entry in self._log:
        counts[entry.outcome] += 1
        counts['delayed'] += 'delay' in entry.fault
      return counts

  @property
  def faulted(self) -> int:
    """Requests the plan made fail in any way (error status, drop or truncation)."""
    counts = self.counts()
    return counts['failed'] + counts['dropped'] + counts['truncated']

  def _decide(self, request: ProxyRequest) -> Optional[Fault]:
    with self._lock:
      self._changed.notify_all()  # the rules' counters change even when none fires
      for rule in self._rules:
        if rule._offer(request):  # pylint: disable=protected-access
          return rule.fault
    return None

  def _record(self, request: ProxyRequest, outcome: str, fault: Optional[Fault],
              status: Optional[int]) -> Tuple[int, int]:
    entry = LoggedRequest(request.method, request.path, urlsplit(request.target).query, request.object_name,
                          is_media_download(request), outcome, fault.describe() if fault else '', status)
    with self._lock:
      self._log.append(entry)
      self._changed.notify_all()
      return self._generation, len(self._log) - 1

  def _amend(self, where: Tuple[int, int], outcome: str) -> None:
    generation, index = where
    with self._lock:
      if generation == self._generation:  # unless reset() ran meanwhile
        self._log[index] = dataclasses.replace(self._log[index], outcome=outcome)
        self._changed.notify_all()


class _Server(ThreadingHTTPServer):
  daemon_threads = False  # handler threads are tracked, and joined by server_close()
  block_on_close = True

  def __init__(self, address, proxy: 'FaultProxy'):
    self.proxy = proxy
    self.connections = set()
    self.connections_lock = threading.Lock()
    super().__init__(address, _Handler)

  def process_request(self, request, client_address):
    with self.connections_lock:
      self.connections.add(request)
    super().process_request(request, client_address)

  def shutdown_request(self, request):
    with self.connections_lock:
      self.connections.discard(request)
    super().shutdown_request(request)

  def handle_error(self, request, client_address):
    pass  # a client that went away mid-request; the request log says what happened


class _Handler(BaseHTTPRequestHandler):
  protocol_version = 'HTTP/1.1'
  server_version = 'fault-proxy'
  timeout = 120  # an idle keep-alive connection ends after this long even if never stopped
  server: _Server

  def log_message(self, format, *args):  # pylint: disable=redefined-builtin
    pass

  def do_GET(self):
    self._proxy()

  do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

  def _proxy(self) -> None:
    proxy = self.server.proxy
    try:
      body = self._read_body()
    except (ValueError, OSError):
      self.close_connection = True
      return
    request = ProxyRequest(self.command, self.path, tuple(self.headers.items()), body)
    plan = proxy.plan
    fault = plan._decide(request)  # pylint: disable=protected-access
    # Outcomes are logged before the client can see the answer, so a client that has
    # its answer (or lost its connection) always finds the request in the counts.
    if fault and fault.delay and proxy._stopping.wait(fault.delay):  # pylint: disable=protected-access
      plan._record(request, 'aborted', fault, None)  # pylint: disable=protected-access
      self.close_connection = True
      return
    if fault and fault.drop:
      plan._record(request, 'dropped', fault, None)  # pylint: disable=protected-access
      self.close_connection = True
      return
    if fault and fault.status:
      plan._record(request, 'failed', fault, fault.status)  # pylint: disable=protected-access
      self._send_error(fault.status)
      return
    self._forward(request, fault)

  def _read_body(self) -> bytes:
    if 'chunked' in self.headers.get('Transfer-Encoding', '').lower():
      parts = []
      while True:
        size = int(self.rfile.readline(65537).split(b';')[0].strip(), 16)
        if size == 0:
          while self.rfile.readline(65537) not in (b'\r\n', b'\n', b''):  # trailers
            pass
          return b''.join(parts)
        parts.append(self.rfile.read(size))
        self.rfile.readline(65537)
    length = int(self.headers.get('Content-Length') or 0)
    return self.rfile.read(length) if length else b''

  def _send_error(self, status: int) -> None:
    phrase = http.client.responses.get(status, 'Error')
    message = f'fault-proxy: injected {status} {phrase}'
    body = json.dumps({'error': {'code': status, 'message': message, 'errors': [
        {'domain': 'global', 'reason': _REASONS.get(status, 'injected'), 'message': message}]}}).encode()
    self.send_response_only(status, phrase)
    self.send_header('Content-Type', 'application/json; charset=UTF-8')
    self.send_header('Content-Length', str(len(body)))
    self.end_headers()
    if self.command != 'HEAD':
      self.wfile.write(body)

  def _forward(self, request: ProxyRequest, fault: Optional[Fault]) -> None:
    proxy, plan = self.server.proxy, self.server.proxy.plan
    truncate = bool(fault and fault.truncate)
    # Headers named in Connection are hop-by-hop too.
    listed = {name.strip().lower() for value in self.headers.get_all('Connection', []) for name in value.split(',')}
    connection = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port,
                                            timeout=proxy.upstream_timeout)
    try:
      try:
        connection.putrequest(request.method, request.target, skip_host=True, skip_accept_encoding=True)
        for name, value in request.headers:
          if name.lower() not in _HOP_BY_HOP | listed | {'content-length'}:
            connection.putheader(name, value)
        if request.body or request.method in ('POST', 'PUT', 'PATCH'):
          connection.putheader('Content-Length', str(len(request.body)))
        connection.putheader('Connection', 'close')
        connection.endheaders(request.body or None)
        response = connection.getresponse()
      except (OSError, http.client.HTTPException):  # the upstream is down or broke the exchange
        plan._record(request, 'upstream_error', fault, 502)  # pylint: disable=protected-access
        self._send_error(502)
        return
      entry = plan._record(request, 'truncated' if truncate else 'forwarded', fault,  # pylint: disable=protected-access
                           response.status)
      try:
        self._relay(request, response, truncate)
      except (OSError, http.client.HTTPException):  # the client went away, or the upstream broke off mid-body
        plan._amend(entry, 'aborted')  # pylint: disable=protected-access
        self.close_connection = True
    finally:
      connection.close()

  def _relay(self, request: ProxyRequest, response: http.client.HTTPResponse, truncate: bool) -> None:
    status = response.status
    has_body = request.method != 'HEAD' and not (100 <= status < 200 or status in (204, 304))
    length = response.getheader('Content-Length')
    chunked = has_body and length is None
    listed = {name.strip().lower() for value in response.headers.get_all('Connection', []) for name in value.split(',')}
    self.send_response_only(status, response.reason)
    for name, value in response.getheaders():
      if name.lower() not in _HOP_BY_HOP | listed:
        self.send_header(name, value)
    if chunked:
      self.send_header('Transfer-Encoding', 'chunked')
    if truncate or self.close_connection:
      self.send_header('Connection', 'close')
    self.end_headers()
    if not has_body:
      response.read()
      return
    # Truncation cuts a known length in half, or an unknown one after half its first read.
    budget = int(length) // 2 if truncate and length is not None else None
    for chunk in _stream(response):
      if truncate:
        if budget is None:
          budget = len(chunk) // 2
        chunk, budget = chunk[:budget], budget - min(budget, len(chunk))
      if chunk:
        self.wfile.write(b'%x\r\n%s\r\n' % (len(chunk), chunk) if chunked else chunk)
      if truncate and budget == 0:
        self.close_connection = True  # the client sees fewer bytes than it was promised
        return
    if chunked:
      self.wfile.write(b'0\r\n\r\n')


def _stream(response: http.client.HTTPResponse) -> Iterator[bytes]:
  while True:
    chunk = response.read1(_CHUNK) if hasattr(response, 'read1') else response.read(_CHUNK)
    if not chunk:
      return
    yield chunk


class FaultProxy:
  """The proxy, listening on 127.0.0.1 on a free port; ``plan`` decides the faults."""

  def __init__(self, upstream: str, upstream_timeout: float = 60.0):
    parts = urlsplit(upstream)
    if parts.scheme != 'http' or not parts.hostname:
      raise ValueError(f'upstream must be an http:// URL, not {upstream!r}')
    self.upstream_host, self.upstream_port = parts.hostname, parts.port or 80
    self.upstream_timeout = upstream_timeout
    self.plan = FaultPlan()
    self._stopping = threading.Event()
    self._server: Optional[_Server] = None
    self._thread: Optional[threading.Thread] = None

  @property
  def url(self) -> str:
    if not self._server:
      raise RuntimeError('the proxy is not running')
    host, port = self._server.server_address[:2]
    return f'http://{host}:{port}'

  def start(self) -> 'FaultProxy':
    if self._server:
      raise RuntimeError('the proxy is already running')
    self._stopping.clear()
    self._server = _Server((_HOST, 0), self)  # port 0: the kernel picks a free port, no race
    self._thread = threading.Thread(target=self._server.serve_forever, kwargs={'poll_interval': 0.05},
                                    name=f'fault-proxy-{self._server.server_address[1]}', daemon=True)
    self._thread.start()
    return self

  def stop(self) -> None:
    """Stops accepting, ends every open connection and delay, and joins every thread."""
    server, self._server = self._server, None
    if not server:
      return
    self._stopping.set()
    server.shutdown()  # the accept loop
    with server.connections_lock:
      connections = list(server.connections)
    for connection in connections:  # idle keep-alive handlers are blocked reading
      try:
        connection.shutdown(socket.SHUT_RDWR)
      except OSError:
        pass
    server.server_close()  # closes the listener and joins the handler threads
    self._thread.join()
    self._thread = None

  def __enter__(self) -> 'FaultProxy':
    return self.start()

  def __exit__(self, *exc_info) -> None:
    self.stop()
