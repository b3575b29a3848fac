"""The example trainer in a subprocess, started as a user starts it: start, wait, finish."""

import errno
import json
import os
import socket
import subprocess
import sys
import time

from tests.support import REPOSITORY

MAIN_SCRIPT = os.path.join(REPOSITORY, "examples", "main.py")


def start(cwd, *args: str, module: str | None = None, devices: int | None = 1,
          env: dict[str, str] | None = None, without: tuple[str, ...] = (),
          output=subprocess.PIPE) -> subprocess.Popen:
  """Starts ``python examples/main.py ARGS`` (or ``python -m MODULE ARGS``) on the CPU,
  in ``cwd``, seeing ``devices`` CPU devices (None: this process's ``XLA_FLAGS``), with
  ``env`` set and the variables whose names start with ``without`` left out.
  """
  environment = {k: v for k, v in os.environ.items() if not k.startswith(without)}
  environment["JAX_PLATFORMS"] = "cpu"
  if devices is not None:
    environment["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
  environment.update(env or {})
  command = [sys.executable, *(["-m", module] if module else [MAIN_SCRIPT]), *args]
  return subprocess.Popen(command, cwd=cwd, env=environment, stdout=output, stderr=output,
                          text=True)


def wait_for(condition, procs, seconds: float = 120.0) -> None:
  """Returns once ``condition()`` holds (asked every 50 ms); fails if a process of
  ``procs`` ends first or ``seconds`` pass (the processes are then killed).
  """
  procs = procs if isinstance(procs, (list, tuple)) else [procs]
  deadline = time.monotonic() + seconds
  while not condition():
    for proc in procs:
      if proc.poll() is not None:
        err = proc.communicate()[1]
        raise AssertionError(f"the trainer ended early: {(err or '')[-2000:]}")
    if time.monotonic() > deadline:
      for proc in procs:
        proc.kill()
      raise AssertionError(f"waited {seconds} s in vain")
    time.sleep(0.05)


def finish(proc: subprocess.Popen, seconds: float) -> tuple[int, str]:
  """Waits at most ``seconds`` for ``proc`` to end, then kills it.

  Returns:
    Its exit status and its stderr.
  """
  try:
    _, err = proc.communicate(timeout=seconds)
  finally:
    proc.kill()
  return proc.returncode, err


def free_port() -> int:
  """A TCP port of 127.0.0.1 free at the time of asking."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def disk_full_at(monkeypatch, checkpoint) -> object:
  """Makes saving ``checkpoint`` (a step's folder) fail as a full disk does.

  Orbax writes a checkpoint into a temporary folder and renames it last: that
  rename raises ``ENOSPC``; every other rename happens.

  Returns:
    The real ``os.rename``, to set back once the disk is freed.
  """
  final_rename = os.rename

  def disk_full(src, dst, *args, **kwargs):
    if os.fspath(dst) == str(checkpoint):
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(dst))
    return final_rename(src, dst, *args, **kwargs)
  monkeypatch.setattr(os, "rename", disk_full)
  return final_rename


def strict_json_lines(path) -> list[dict]:
  """The records of a JSON-lines file, refusing NaN and infinities (not JSON)."""
  def refuse(name):
    raise ValueError(f"{name} is not JSON")
  return [json.loads(line, parse_constant=refuse) for line in open(path)]
