"""Errors raised for bad model input."""

from __future__ import annotations


class ModelError(ValueError):
  """A model file or string that jaxsim cannot compile.

  The message names the file, line, element and attribute where known, and what was expected.
  """

  def __init__(
    self,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    element: str | None = None,
    attribute: str | None = None,
  ):
    self.file = file
    self.line = line
    self.element = element
    self.attribute = attribute
    self.reason = message
    where = []
    if file is not None:
      where.append(f'{file}:{line}' if line is not None else str(file))
    elif line is not None:
      where.append(f'line {line}')
    if element is not None:
      where.append(f'<{element}>')
    if attribute is not None:
      where.append(f"attribute '{attribute}'")
    prefix = ' '.join(where)
    super().__init__(f'{prefix}: {message}' if prefix else message)
