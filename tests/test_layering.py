"""The import structure of electra_tf: layers point one way, no cycles, small files, one module
per name. Parsed from the source (lazy imports inside functions count), nothing imported."""

import ast
import os
import re
import tomllib
from collections import defaultdict

import pytest
from testing_utils import ROOT

# Lowest first. A module may import its own layer or lower ones, never a higher one.
LAYERS = (
    ("ground", ("electra_tf", "electra_tf.atomic", "electra_tf.cli", "electra_tf.config",
                "electra_tf.fileio",
                "electra_tf.errors", "electra_tf.features", "electra_tf.filenames",
                "electra_tf.presets")),
    ("formats", ("electra_tf.data", "electra_tf.model", "electra_tf.checkpoints")),
    ("training", ("electra_tf.training",)),
    ("applications", ("electra_tf.tasks", "electra_tf.serving")),
    ("entry points", ("electra_tf.commands",)),
)
# Imports between packages of one layer that the architecture forbids anyway.
FORBIDDEN = (
    ("electra_tf.data", "electra_tf.model"),  # the input pipeline knows no model
    ("electra_tf.model", "electra_tf.data"),  # the model knows no input pipeline
    ("electra_tf.data", "electra_tf.checkpoints"),
    ("electra_tf.model", "electra_tf.checkpoints"),  # formats read models, not the reverse
    ("electra_tf.tasks", "electra_tf.serving"),  # serving builds on tasks
)
MAX_LINES = 300


def module_files(package_dir: str) -> dict[str, str]:
  """{dotted module name: file} of every .py file under `package_dir`."""
  base = os.path.dirname(package_dir)
  out = {}
  for directory, _, files in os.walk(package_dir):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(directory, name)
        dotted = os.path.relpath(path, base)[:-3].replace(os.sep, ".")
        out[dotted.removesuffix(".__init__")] = path
  return out


def imports_of(path: str, module: str, known: set[str]) -> set[str]:
  """The modules `module` imports (anywhere in the file), resolved against `known`."""
  tree = ast.parse(open(path, encoding="utf-8").read(), path)
  is_package = path.endswith("__init__.py")
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      if node.level:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        prefix = ".".join(parts[:keep])
        base = f"{prefix}.{node.module}" if node.module else prefix
      else:
        base = node.module
      found.add(base)
      found.update(f"{base}.{alias.name}" for alias in node.names)
  return {name for name in found if name in known or name.split(".")[0] == "configs"}


def import_graph(package_dir: str) -> dict[str, set[str]]:
  files = module_files(package_dir)
  known = set(files)
  return {module: imports_of(path, module, known) - {module} for module, path in files.items()}


def layer_of(module: str) -> int:
  best, rank = -1, None
  for index, (_, prefixes) in enumerate(LAYERS):
    for prefix in prefixes:
      if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
        best, rank = len(prefix), index
  if rank is None:
    raise AssertionError(f"{module} is in no layer; add its package to LAYERS")
  return rank


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
  """Every import of a higher layer, of a forbidden sibling, or of the top-level configs/."""
  problems = []
  for module, targets in sorted(graph.items()):
    for target in sorted(targets):
      if target.split(".")[0] == "configs":
        problems.append(f"{module} imports {target}: presets are read through "
                        "electra_tf.presets, never imported")
      elif layer_of(target) > layer_of(module):
        problems.append(f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                        f"({LAYERS[layer_of(target)][0]})")
      elif any(module.startswith(a) and target.startswith(b) for a, b in FORBIDDEN):
        problems.append(f"{module} imports {target}, which its package must not use")
  return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """Strongly connected components of more than one module (Tarjan)."""
  index, low, stack, on_stack, out = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for nxt in graph.get(node, ()):
      if nxt not in index:
        visit(nxt)
        low[node] = min(low[node], low[nxt])
      elif nxt in on_stack:
        low[node] = min(low[node], index[nxt])
    if low[node] == index[node]:
      component = []
      while True:
        top = stack.pop()
        on_stack.discard(top)
        component.append(top)
        if top == node:
          break
      if len(component) > 1:
        out.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return out


PACKAGE = os.path.join(ROOT, "electra_tf")


def test_no_import_reaches_up_a_layer():
  assert upward_imports(import_graph(PACKAGE)) == []


def test_no_import_cycles():
  assert cycles(import_graph(PACKAGE)) == []


@pytest.mark.parametrize("top", ["electra_tf", "tests"])
def test_files_stay_small(top):
  long = {}
  for directory, _, files in os.walk(os.path.join(ROOT, top)):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(directory, name)
        lines = sum(1 for _ in open(path, encoding="utf-8"))
        if lines > MAX_LINES:
          long[os.path.relpath(path, ROOT)] = lines
  assert long == {}


def test_one_module_per_name():
  """No two modules or packages of electra_tf share a name (one `convert`, one `checkpoints`)."""
  seen = defaultdict(list)
  for module in module_files(PACKAGE):
    seen[module.rsplit(".", 1)[-1]].append(module)
  assert {name: mods for name, mods in seen.items() if len(mods) > 1} == {}


def test_pyproject_lists_every_package():
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
  packages = {m for m, path in module_files(PACKAGE).items() if path.endswith("__init__.py")}
  assert packages | {"electra_tf.configs"} == listed


def _write(root, files):
  for name, text in files.items():
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_checks_catch_an_upward_import_and_a_cycle(tmp_path):
  """The checks above fail on a package that breaks the rules (they can fail)."""
  _write(tmp_path, {
      "electra_tf/__init__.py": "",
      "electra_tf/errors.py": "",
      "electra_tf/checkpoints/__init__.py": "",
      "electra_tf/checkpoints/native.py": "def f():\n  from electra_tf.training import run\n",
      "electra_tf/training/__init__.py": "",
      "electra_tf/training/run.py": "from ..checkpoints import native\nimport configs\n",
      "electra_tf/data/__init__.py": "",
      "electra_tf/data/pipeline.py": "from electra_tf.model import layers\n",
      "electra_tf/model/__init__.py": "",
      "electra_tf/model/layers.py": "from electra_tf import errors\n",
  })
  graph = import_graph(str(tmp_path / "electra_tf"))
  problems = upward_imports(graph)
  assert any(re.match(r"electra_tf.checkpoints.native \(formats\) imports "
                      r"electra_tf.training.run \(training\)", p) for p in problems), problems
  assert any(p.startswith("electra_tf.training.run imports configs") for p in problems)
  assert any(p.startswith("electra_tf.data.pipeline imports electra_tf.model.layers")
             for p in problems)
  assert cycles(graph) == [["electra_tf.checkpoints.native", "electra_tf.training.run"]]
