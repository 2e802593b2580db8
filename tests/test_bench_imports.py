"""bench/ is one folder per question: every script imports in a fresh process, and scripts
share code only through one helper module of their own folder (no script imports another
that imports it back, no folder reaches into another)."""

import ast
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from test_layering import cycles
from testing_utils import ROOT

BENCH = os.path.join(ROOT, "bench")


def bench_modules(bench_dir: str) -> dict[str, str]:
  """{folder/name: file} of every script under bench_dir's folders (results/ excluded)."""
  out = {}
  for folder in sorted(os.listdir(bench_dir)):
    directory = os.path.join(bench_dir, folder)
    if not os.path.isdir(directory) or folder == "results":
      continue
    for name in sorted(os.listdir(directory)):
      if name.endswith(".py"):
        out[f"{folder}/{name[:-3]}"] = os.path.join(directory, name)
  return out


def bench_graph(bench_dir: str) -> dict[str, set[str]]:
  """{module: the bench modules it imports, anywhere in the file (lazy imports count)}."""
  modules = bench_modules(bench_dir)
  by_name = {}
  for module in modules:
    by_name.setdefault(module.split("/")[1], []).append(module)
  graph = {}
  for module, path in modules.items():
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    names = set()
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        names.update(alias.name.split(".")[0] for alias in node.names)
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        names.add(node.module.split(".")[0])
    graph[module] = {target for name in names for target in by_name.get(name, ())} - {module}
  return graph


def problems_of(graph: dict[str, set[str]]) -> list[str]:
  """Cycles, imports across folders, more than one imported module in a folder, and
  imported modules (helpers) that import bench modules themselves."""
  problems = [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
  helpers = {}
  for module, targets in sorted(graph.items()):
    for target in sorted(targets):
      if target.split("/")[0] != module.split("/")[0]:
        problems.append(f"{module} imports {target} from another folder")
      else:
        helpers.setdefault(target.split("/")[0], set()).add(target)
  for folder, imported in sorted(helpers.items()):
    if len(imported) > 1:
      problems.append(f"bench/{folder}: scripts import {sorted(imported)}; share code "
                      "through one helper module")
    for helper in sorted(imported):
      if graph[helper]:
        problems.append(f"{helper} is imported by other scripts and imports "
                        f"{sorted(graph[helper])} itself")
  return problems


def test_bench_scripts_import_only_their_folders_helper():
  graph = bench_graph(BENCH)
  assert problems_of(graph) == []
  # The folders that share code, and through what.
  used = {t for targets in graph.values() for t in targets}
  assert used == {"speed/step_lib", "quality/study_lib", "finetune/finetune_transformers",
                  "fidelity/authors_lib", "serving/serving_lib"}
  names = [module.split("/")[1] for module in graph]
  assert len(names) == len(set(names)), "two bench scripts share a name (one sys.path)"


def test_the_check_catches_a_cycle_a_second_helper_and_a_cross_folder_import(tmp_path):
  files = {"a/one.py": "import two\n", "a/two.py": "def f():\n  import one\n",
           "a/three.py": "from four import x\n", "a/four.py": "",
           "b/five.py": "import four\n"}
  for name, text in files.items():
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_text(text)
  problems = problems_of(bench_graph(str(tmp_path)))
  assert "import cycle: a/one -> a/two" in problems
  assert "b/five imports a/four from another folder" in problems
  assert any(p.startswith("bench/a: scripts import") for p in problems), problems


def _import_fresh(module: str) -> tuple[str, int, str]:
  folder, name = module.split("/")
  code = f"import sys; sys.path.insert(0, {os.path.join(BENCH, folder)!r}); import {name}"
  done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                        text=True, timeout=300, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
  return module, done.returncode, done.stderr[-2000:]


def test_every_bench_module_imports_in_a_fresh_process():
  with ThreadPoolExecutor(max_workers=2) as pool:
    results = list(pool.map(_import_fresh, sorted(bench_modules(BENCH))))
  failed = {module: err for module, code, err in results if code}
  assert failed == {}
