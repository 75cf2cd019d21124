"""Every Python block in README.md and docs/*.md runs as written, from the repository root."""

from __future__ import annotations

import glob
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [os.path.join(REPO, 'README.md')] + sorted(glob.glob(os.path.join(REPO, 'docs', '*.md')))


def _blocks() -> list[tuple[str, int, str]]:
  out = []
  for page in PAGES:
    text = open(page).read()
    for m in re.finditer(r'```python\n(.*?)```', text, re.S):
      line = text[: m.start()].count('\n') + 1
      out.append((os.path.relpath(page, REPO), line, m.group(1)))
  return out


BLOCKS = _blocks()


def test_readme_has_a_python_example():
  assert any(page == 'README.md' for page, _, _ in BLOCKS)


@pytest.mark.parametrize('page,line,code', BLOCKS, ids=[f'{p}:{n}' for p, n, _ in BLOCKS])
def test_python_block_runs(page, line, code, monkeypatch):
  monkeypatch.chdir(REPO)
  exec(compile(code, f'{page}:{line}', 'exec'), {'__name__': '__readme__'})
