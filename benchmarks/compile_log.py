"""Where the test suite's time goes: every XLA program it traces, lowers and compiles.

As a pytest plugin it records, per test, JAX's own timings (jax_log_compiles) of each program's
tracing, lowering and XLA compiling, with the program's XLA cache key, into one JSON file per
xdist worker; run as a script it sums those files by program, by test file, and over programs
compiled more than once (the same key). From the repository's root:

  python -m pytest -q -n 2 -p benchmarks.compile_log tests/test_adhesion.py
  python benchmarks/compile_log.py

COMPILE_LOG_DIR names the folder of the JSON files (default: jaxsim-compile-log in the system's
temporary folder); a run starts by removing the files a previous run left there. The suite's
persistent compilation cache (tests/conftest.py) turns a repeated program into a cache read,
which this log does not count as a compile: add JAXSIM_TEST_CACHE=off to see every compile.
"""

from __future__ import annotations

import atexit
import collections
import glob
import json
import logging
import os
import re
import sys
import tempfile

import jax

PREFIX = 'compile_log_'
FOLDER = os.environ.get('COMPILE_LOG_DIR') or os.path.join(
  tempfile.gettempdir(), 'jaxsim-compile-log'
)
_TIMINGS = (
  ('trace', re.compile(r'Finished tracing (.*?) for jit in ([0-9.e-]+) sec')),
  ('lower', re.compile(r'Finished jaxpr to MLIR module conversion (.*?) in ([0-9.e-]+) sec')),
  ('compile', re.compile(r'Finished XLA compilation of (.*?) in ([0-9.e-]+) sec')),
)
_KEY = re.compile(r"CACHE MISS for '.*?' with key '(.*?)'")


class _Recorder(logging.Handler):
  """Collects (stage, program, key, seconds) per test from JAX's log records."""

  def __init__(self):
    super().__init__(logging.DEBUG)
    self.test = None
    self.key = None
    self.records: dict[str, list] = {}

  def emit(self, record: logging.LogRecord) -> None:
    msg = record.getMessage()
    key = _KEY.search(msg)
    if key:
      self.key = key.group(1)
      return
    for stage, pattern in _TIMINGS:
      found = pattern.search(msg)
      if found:
        key = self.key if stage == 'compile' else None
        row = (stage, found.group(1), key, float(found.group(2)))
        self.records.setdefault(self.test or '(outside tests)', []).append(row)
        return


_recorder = _Recorder()


def pytest_configure(config) -> None:
  if 'PYTEST_XDIST_WORKER' not in os.environ:
    # the controller (or the only process): a new run's files only
    os.makedirs(FOLDER, exist_ok=True)
    for old in glob.glob(os.path.join(FOLDER, f'{PREFIX}*.json')):
      os.remove(old)
  jax.config.update('jax_log_compiles', True)
  # jax logs compile timings as warnings and cache keys at debug level; kept out of pytest's
  # capture and the terminal (the suite's own log checks install their handlers per test)
  for name in ('jax._src.dispatch', 'jax._src.interpreters.pxla', 'jax._src.compiler'):
    logger = logging.getLogger(name)
    logger.addHandler(_recorder)
    logger.setLevel(logging.DEBUG)
  atexit.register(_dump)


def pytest_runtest_setup(item) -> None:
  _recorder.test = item.nodeid


def pytest_runtest_teardown(item) -> None:
  _recorder.test = None


def _dump() -> None:
  worker = os.environ.get('PYTEST_XDIST_WORKER', 'main')
  path = os.path.join(FOLDER, f'{PREFIX}{worker}.json')
  with open(path, 'w') as f:
    json.dump(_recorder.records, f)


def summarize(paths: list[str], top: int = 20) -> str:
  """Tables of the recorded seconds: by stage, by program, by test file, and repeats."""
  records: dict[str, list] = {}
  for p in paths:
    with open(p) as f:
      records.update(json.load(f))
  stage = collections.Counter()
  program = collections.Counter()
  count = collections.Counter()
  per_file = collections.Counter()
  keys = collections.defaultdict(list)
  for test, rows in records.items():
    for kind, name, key, sec in rows:
      stage[kind] += sec
      if kind == 'compile':
        program[name] += sec
        count[name] += 1
        per_file[test.split('::')[0]] += sec
        if key:
          keys[key].append(sec)
  out = [f'{len(paths)} file(s), {len(records)} tests']
  out.append('seconds: ' + ', '.join(f'{k} {v:,.1f}' for k, v in stage.most_common()))
  out.append('(tracing counts a nested jit inside its caller too)')
  out.append('\n| program | compiles | compile s |\n|---|---|---|')
  out += [f'| {n} | {count[n]} | {s:,.1f} |' for n, s in program.most_common(top)]
  out.append('\n| test file | compile s |\n|---|---|')
  out += [f'| {n} | {s:,.1f} |' for n, s in per_file.most_common(top)]
  again = sum(sum(v[1:]) for v in keys.values())
  repeated = sum(1 for v in keys.values() if len(v) > 1)
  out.append(f'\nprograms compiled more than once: {repeated}, {again:,.1f} s after the first')
  return '\n'.join(out)


def main(argv: list[str]) -> int:
  folder = argv[0] if argv else FOLDER
  paths = sorted(glob.glob(os.path.join(folder, f'{PREFIX}*.json')))
  if not paths:
    print(f'no {PREFIX}*.json in {folder}: run pytest with -p benchmarks.compile_log first')
    return 1
  print(summarize(paths))
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
