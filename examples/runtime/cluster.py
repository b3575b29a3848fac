"""How the processes of one run find each other: ``join``.

JAX's own start-up (``jax.distributed.initialize``) ends a process with a
native abort, which Python cannot catch, when a peer never comes or the
coordinator's port is taken. So the processes first meet in a small handshake
of their own on the coordinator's address: process 0 listens there (on that
host only) until the others have said who they are, then closes the port and
hands over to JAX. Whatever goes wrong before that ends in one line and exit
status 2. What can still go wrong inside JAX afterwards (a process dying
between the two starts) is JAX's to report.

Only a multi-process run needs this module; once joined, the processes
compare values with ``processes.py``.
"""

from __future__ import annotations

import errno
import socket
import sys
import time

import jax

from ..errors import ConfigError
from ..errors import PortInUse

_GREETING = "vsgd-trainer-join"
_HOW = ("start every process with the same --coordinator-address and --num-processes, "
        "each with its own --process-id (0..N-1)")


def _host_and_port(address: str) -> tuple[str, int]:
  host, sep, port = address.rpartition(":")
  if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
    raise ConfigError(
        f"--coordinator-address must be HOST:PORT (e.g. 127.0.0.1:12355), got {address!r}")
  return host.strip("[]"), int(port)


def _read_line(conn: socket.socket, limit: int = 512) -> str | None:
  """One newline-ended ASCII line, or None if what arrives is not one."""
  data = b""
  while not data.endswith(b"\n"):
    chunk = conn.recv(1)
    if not chunk or len(data) >= limit:
      return None
    data += chunk
  try:
    return data.decode("ascii").strip()
  except UnicodeDecodeError:
    return None


class _Notice:
  """One line on stderr once a wait has lasted ``after`` seconds, so that a
  long wait is not silent.
  """

  def __init__(self, text: str, after: float = 10.0):
    self.text, self.due = text, time.monotonic() + after

  def maybe_print(self) -> None:
    if time.monotonic() >= self.due:
      print(f"{self.text}...", file=sys.stderr, flush=True)
      self.due = float("inf")


def _gather_peers(host: str, port: int, num_processes: int, timeout: float) -> None:
  """Process 0: waits on HOST:PORT until processes 1..N-1 have all arrived."""
  try:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # SO_REUSEADDR (create_server's default): JAX's coordinator binds here next.
    listener = socket.create_server((host, port), family=family)
  except OSError as err:
    if err.errno == errno.EADDRINUSE:
      raise PortInUse(f"process 0 cannot host the coordinator at {host}:{port}: port {port} "
                      "is in use (by another run?); choose a free port.") from None
    if err.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
      why = f"{host} is not an address of this machine; start process 0 on {host}"
    else:
      why = err.strerror or str(err)
    raise ConfigError(
        f"process 0 cannot host the coordinator at {host}:{port}: {why}.") from None
  peers: dict[int, socket.socket] = {}
  deadline = time.monotonic() + timeout
  with listener:
    notice = _Notice(f"process 0 is waiting at {host}:{port} for the other "
                     f"{num_processes - 1} process(es), at most {timeout:g} s")
    while len(peers) < num_processes - 1 and time.monotonic() < deadline:
      listener.settimeout(max(min(deadline, notice.due) - time.monotonic(), 0.01))
      try:
        conn, _ = listener.accept()
      except TimeoutError:
        notice.maybe_print()
        continue
      conn.settimeout(2.0)
      try:
        words = (_read_line(conn) or "").split()
      except OSError:
        words = []
      if len(words) != 3 or words[0] != _GREETING or not all(w.isdigit() for w in words[1:]):
        conn.close()  # not one of ours
        continue
      their_id, their_count = int(words[1]), int(words[2])
      refusal = None
      if their_count != num_processes:
        refusal = f"process 0 runs with --num-processes {num_processes}, not {their_count}"
      elif not 0 < their_id < num_processes or their_id in peers:
        refusal = f"--process-id {their_id} is taken or not in 1..{num_processes - 1}"
      if refusal:
        conn.sendall(f"fail {refusal}; {_HOW}\n".encode())
        conn.close()
        continue
      conn.sendall(b"wait\n")
      peers[their_id] = conn
    missing = [i for i in range(1, num_processes) if i not in peers]
    verdict = "go\n"
    if missing:
      names = ", ".join(map(str, missing))
      which = names if len(missing) == 1 else f"I (I = {names})"
      verdict = (f"fail process 0 waited {timeout:g} s at {host}:{port} for process(es) "
                 f"{names} of {num_processes}, which did not come; start each with "
                 f"--coordinator-address {host}:{port} --num-processes {num_processes} "
                 f"--process-id {which}, or raise --initialization-timeout\n")
    for conn in peers.values():
      try:
        conn.sendall(verdict.encode())
      except OSError:
        pass
      conn.close()
  if missing:
    raise ConfigError(verdict[len("fail "):].strip() + ".")


def _wait_for_coordinator(host: str, port: int, process_id: int, num_processes: int,
                          timeout: float) -> None:
  """Processes 1..N-1: report to process 0, then wait for its word to go."""
  deadline = time.monotonic() + timeout
  stranger = False  # something answers at the address, but not process 0 of a run
  notice = _Notice(f"process {process_id} is waiting for the coordinator (process 0) at "
                   f"{host}:{port}, at most {timeout:g} s")
  while time.monotonic() < deadline:
    notice.maybe_print()
    try:
      conn = socket.create_connection((host, port), timeout=2.0)
    except OSError:
      time.sleep(0.2)
      continue
    with conn:
      try:
        conn.sendall(f"{_GREETING} {process_id} {num_processes}\n".encode())
        answer = _read_line(conn)
      except OSError:
        answer = None
      if answer is not None and answer.startswith("fail "):
        raise ConfigError(f"process {process_id}: {answer[len('fail '):]}.")
      if answer != "wait":
        stranger = True
        time.sleep(0.5)
        continue
      # Process 0 answers within its own deadline, which is close to ours.
      conn.settimeout(max(deadline - time.monotonic(), 0.0) + 10.0)
      try:
        verdict = _read_line(conn)
      except OSError:
        verdict = None
      if verdict == "go":
        return
      if verdict is not None and verdict.startswith("fail "):
        raise ConfigError(f"process {process_id} stops: {verdict[len('fail '):]}.")
      break  # process 0 went away
  found = ("something answers there, but not process 0 of a run; "
           if stranger else "")
  raise ConfigError(
      f"process {process_id} waited {timeout:g} s for the coordinator (process 0) at "
      f"{host}:{port}; {found}start process 0 on that host with --coordinator-address "
      f"{host}:{port} --num-processes {num_processes} --process-id 0, or raise "
      "--initialization-timeout.")


def join(coordinator_address: str | None, num_processes: int | None,
         process_id: int | None, timeout: float) -> None:
  """Meets the other processes, then starts JAX's distributed runtime.

  With no ``coordinator_address``, JAX finds all three values in the cluster's
  environment (SLURM, Open MPI, ...); there is no handshake before it then.
  """
  # JAX's preemption service would take SIGTERM over from the trainer's own
  # handling (stopping.py), which all processes agree on through ``any_process``.
  jax.config.update("jax_enable_preemption_service", False)
  if coordinator_address is None:
    jax.distributed.initialize(initialization_timeout=max(int(timeout), 1))
    return
  host, port = _host_and_port(coordinator_address)
  if num_processes > 1:
    if process_id == 0:
      _gather_peers(host, port, num_processes, timeout)
    else:
      _wait_for_coordinator(host, port, process_id, num_processes, timeout)
  # JAX's default binds the coordinator to every interface; keep it to the one given.
  bind = coordinator_address if process_id == 0 else None
  jax.distributed.initialize(coordinator_address, num_processes, process_id,
                             initialization_timeout=max(int(timeout), 1),
                             coordinator_bind_address=bind)
