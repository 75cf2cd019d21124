"""The house rules of DESIGN.md, checked on the source: imports point down (no cycle, no import
of a jaxsim module inside a function, no use of another module's `_private` name), every MuJoCo
enum and constant is defined once (in jaxsim/_src/enums.py), and those equal MuJoCo's."""

from __future__ import annotations

import ast
import enum
import pathlib
import re

import mujoco
import pytest

from jaxsim._src import enums

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'jaxsim'


def _modules() -> dict[str, pathlib.Path]:
  """Dotted module name -> file, for every module of the jaxsim package."""
  out = {}
  for path in sorted(PACKAGE.rglob('*.py')):
    parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
    if parts[-1] == '__init__':
      parts = parts[:-1]
    out['.'.join(parts)] = path
  return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _package_of(name: str) -> str:
  return name if MODULES[name].name == '__init__.py' else name.rpartition('.')[0]


def _imports(name: str, tree: ast.Module | None = None):
  """(node, imported module, imported names) for every import statement of a module (or of a
  test file's `tree`), with relative imports resolved."""
  for node in ast.walk(TREES[name] if tree is None else tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        yield node, a.name, ()
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        pkg = _package_of(name).split('.')
        base = '.'.join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
      names = tuple(a.name for a in node.names)
      yield node, base, names


def _edges(name: str) -> set[str]:
  out = set()
  for _, base, names in _imports(name):
    for n in names or ('',):
      full = f'{base}.{n}' if n else base
      target = full if full in MODULES else base
      if target in MODULES and target != name:
        out.add(target)
  return out


def _cycles() -> list[list[str]]:
  """Strongly connected components of more than one module (Tarjan)."""
  graph = {m: _edges(m) for m in MODULES}
  index, low, stack, on, out = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in graph[v]:
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop()
        on.discard(w)
        comp.append(w)
        if w == v:
          break
      if len(comp) > 1:
        out.append(sorted(comp))

  for v in graph:
    if v not in index:
      visit(v)
  return out


def test_import_graph_has_no_cycle():
  """Every import of every module, at module level or inside functions, counts."""
  assert _cycles() == []


def test_no_jaxsim_import_inside_functions():
  """Imports inside functions are for optional packages only (mujoco, matplotlib, ...)."""
  local = []
  for name, tree in TREES.items():
    for fn in ast.walk(tree):
      if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for node in ast.walk(fn):
          if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            if node.__dict__.get('level') or any((m or '').split('.')[0] == 'jaxsim' for m in mods):
              local.append(f'{name}.{fn.name}: line {node.lineno}')
  assert local == []


def _module_aliases(name: str, tree: ast.Module | None = None) -> dict[str, str]:
  """Local name -> jaxsim module, for the modules a module (or a test's `tree`) imports as
  names."""
  out = {}
  for node, base, _ in _imports(name, tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        if a.name in MODULES and a.asname:
          out[a.asname] = a.name
      continue
    for a in node.names:
      full = f'{base}.{a.name}'
      if full in MODULES:
        out[a.asname or a.name] = full
  return out


def test_no_module_uses_another_modules_private_names():
  """A helper two modules need is public in its owner (`from m import _x` and `m._x` both count;
  dunders are not private)."""
  private = lambda n: n.startswith('_') and not n.startswith('__')  # noqa: E731
  uses = []
  for name, tree in TREES.items():
    for _, base, names in _imports(name):
      if base.split('.')[0] != 'jaxsim':
        continue
      for n in names:
        if private(n) and f'{base}.{n}' not in MODULES:
          uses.append(f'{name}: from {base} import {n}')
    aliases = _module_aliases(name)
    for node in ast.walk(tree):
      if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id in aliases and private(node.attr):
          if f'{aliases[node.value.id]}.{node.attr}' not in MODULES:
            uses.append(f'{name}: {node.value.id}.{node.attr} (line {node.lineno})')
  assert uses == []


def _private_uses(name: str, tree: ast.Module) -> list[str]:
  private = lambda n: n.startswith('_') and not n.startswith('__')  # noqa: E731
  uses = []
  for _, base, names in _imports(name, tree):
    if base.split('.')[0] != 'jaxsim':
      continue
    uses += [f'{name}: from {base} import {n}' for n in names if private(n)]
    uses = [
      u for u in uses if u.rpartition(' ')[2] and f'{base}.{u.rpartition(" ")[2]}' not in MODULES
    ]
  aliases = _module_aliases(name, tree)
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
      if node.value.id in aliases and private(node.attr):
        if f'{aliases[node.value.id]}.{node.attr}' not in MODULES:
          uses.append(f'{name}: {node.value.id}.{node.attr} (line {node.lineno})')
  return uses


def test_tests_use_only_public_names():
  """Tests reach the package through public names (or names a module makes public for them)."""
  uses = []
  for path in sorted(pathlib.Path(__file__).parent.glob('*.py')):
    uses += _private_uses(f'tests.{path.stem}', ast.parse(path.read_text()))
  assert uses == []


CONSTANTS = [
  'MINVAL',
  'MAXVAL',
  'MINIMP',
  'MAXIMP',
  'MINMU',
  'NPOLY',
  'NGROUP',
  'NREF',
  'NIMP',
  'MAXCONPAIR',
]


def test_constants_and_enums_are_defined_once():
  """MuJoCo's constants and enums live in jaxsim/_src/enums.py only: no module assigns one of
  their names (with or without a leading underscore) or defines an IntEnum/IntFlag class."""
  names = '|'.join(CONSTANTS)
  assign = re.compile(rf'^\s*_?({names})\s*(:[^=]*)?=', re.M)
  enum_class = re.compile(r'^class \w+\((enum\.)?(IntEnum|IntFlag)\)', re.M)
  found = []
  for name, path in MODULES.items():
    if name == 'jaxsim._src.enums':
      continue
    text = path.read_text()
    found += [f'{name}: {m.group(0).strip()}' for m in assign.finditer(text)]
    found += [f'{name}: {m.group(0)}' for m in enum_class.finditer(text)]
  assert found == []


def test_enums_module_imports_neither_jax_nor_numpy():
  """jaxsim.mjcf reads the enums; the compiler must not pull in JAX through them."""
  imported = {base.split('.')[0] for _, base, _ in _imports('jaxsim._src.enums')}
  assert imported <= {'__future__', 'enum'}


# jaxsim enum -> (MuJoCo enum, prefix of its member names); members jaxsim adds are listed
ENUMS = {
  enums.JointType: (mujoco.mjtJoint, 'mjJNT_'),
  enums.GeomType: (mujoco.mjtGeom, 'mjGEOM_'),
  enums.IntegratorType: (mujoco.mjtIntegrator, 'mjINT_'),
  enums.SolverType: (mujoco.mjtSolver, 'mjSOL_'),
  enums.ConeType: (mujoco.mjtCone, 'mjCONE_'),
  enums.TrnType: (mujoco.mjtTrn, 'mjTRN_'),
  enums.DynType: (mujoco.mjtDyn, 'mjDYN_'),
  enums.GainType: (mujoco.mjtGain, 'mjGAIN_'),
  enums.BiasType: (mujoco.mjtBias, 'mjBIAS_'),
  enums.EqType: (mujoco.mjtEq, 'mjEQ_'),
  enums.WrapType: (mujoco.mjtWrap, 'mjWRAP_'),
  enums.DisableBit: (mujoco.mjtDisableBit, 'mjDSBL_'),
  enums.EnableBit: (mujoco.mjtEnableBit, 'mjENBL_'),
  enums.SensorType: (mujoco.mjtSensor, 'mjSENS_'),
  enums.ConstraintType: (mujoco.mjtConstraint, 'mjCNSTR_'),
  enums.ConstraintState: (mujoco.mjtConstraintState, 'mjCNSTRSTATE_'),
  enums.ObjType: (mujoco.mjtObj, 'mjOBJ_'),
  enums.Stage: (mujoco.mjtStage, 'mjSTAGE_'),
  enums.DataType: (mujoco.mjtDataType, 'mjDATATYPE_'),
  enums.CamLight: (mujoco.mjtCamLight, 'mjCAMLIGHT_'),
  enums.WarningType: (mujoco.mjtWarning, 'mjWARN_'),
  enums.JacobianType: (mujoco.mjtJacobian, 'mjJAC_'),
}
JAXSIM_ONLY = {'IntegratorType.VARIATIONAL'}


@pytest.mark.parametrize('ours', list(ENUMS), ids=lambda e: e.__name__)
def test_enum_matches_mujoco(ours: type[enum.IntEnum]):
  """Every member has MuJoCo's value under MuJoCo's name (jaxsim's own additions excepted)."""
  theirs, prefix = ENUMS[ours]
  for member in ours:
    if f'{ours.__name__}.{member.name}' in JAXSIM_ONLY:
      continue
    assert int(getattr(theirs, prefix + member.name)) == int(member), member


def test_every_enum_is_compared():
  defined = [v for v in vars(enums).values() if isinstance(v, type) and issubclass(v, enum.Enum)]
  assert set(defined) == set(ENUMS)


@pytest.mark.parametrize('name', CONSTANTS)
def test_constant_matches_mujoco(name: str):
  assert getattr(enums, name) == getattr(mujoco, 'mj' + name)


def test_warning_counters_match_mujoco():
  assert enums.NWARNING == int(mujoco.mjtWarning.mjNWARNING) == len(enums.WarningType)
