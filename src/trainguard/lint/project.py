"""Models built by code in another file of the same project.

``model = make()`` with ``from models import make`` (or ``from .models import make``,
``import models`` then ``models.Net()``) says nothing about Dropout or BatchNorm in the linted
file itself. :func:`imported_builder` resolves the name the model is built with to a file of the
same project, as Python would find it when the script runs: relative imports from the file's
package, absolute ones from the file's folder (``sys.path[0]`` of ``python train.py``) and the
folders above it up to the project root (the first folder holding ``pyproject.toml``,
``setup.py``, ``setup.cfg`` or ``.git``). Installed packages are never read.

In that file it reads the class or function itself, the same-file classes and functions it
uses, and, two imports deep, the same-project names they import: a builder is mode-dependent when
that code shows Dropout, BatchNorm or a model zoo (the same signs the linter looks for in a
script). Files are parsed once per process (cached by path and modification time), and only when
a rule asks about a script whose own text shows no such module; torch is never imported.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from trainguard.apifacts import MODE_RULES

if TYPE_CHECKING:
    from trainguard.lint.script import Script

__all__ = ["Builder", "imported_builder", "import_specs", "MODE_DEPENDENT", "project_script",
           "foreign_definition"]

MODE_DEPENDENT = re.compile("|".join((
    # mode-dependent as constructed by default (trainguard.apifacts, shared with run and explain)
    *sorted({c for rule in MODE_RULES if rule.depends(rule.default) for c in rule.classes}),
    # ... or by a probability passed to the constructor (LSTM/GRU/MultiheadAttention dropout=)
    *sorted({rule.attribute for rule in MODE_RULES
             if rule.positive and not rule.depends(rule.default)}),
    r"InstanceNorm\w*\([^)]*track_running",  # (its flag is off by default)
    "BatchNorm",  # (the stem: user subclasses of _BatchNorm, FrozenBatchNorm-like names)
    # model zoos, whose models hold such modules
    "torchvision", "timm", "from_pretrained", "transformers", "resnet", "vgg", "densenet",
    "efficientnet", "mobilenet", "inception")))
"""Text that shows a module whose behaviour depends on train/eval mode."""

_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
_MAX_UP = 4  # folders above the file searched for an absolute import's package
_IMPORT_DEPTH = 2  # same-project imports followed from the builder's file
_SETS_MODE = re.compile(r"\.(eval|train)\s*\(")


@dataclass(frozen=True)
class Builder:
    """A class or function of another project file that a model is built with.

    Attributes:
        path: the file that defines it.
        name: its name there.
        kind: ``"class"`` or ``"function"``.
        mode_dependent: its code (or what it uses) shows Dropout, BatchNorm or a model zoo.
        sets_mode: it calls ``.eval()``/``.train()`` itself (a loader returning an eval model),
            so the mode of what it returns is not "freshly built, train".
    """

    path: str
    name: str
    kind: Literal["class", "function"]
    mode_dependent: bool
    sets_mode: bool


class _Module:
    """A parsed project file: its top-level definitions and the names it imports."""

    def __init__(self, path: Path, text: str, tree: ast.Module) -> None:
        self.path = path
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.defs: dict[str, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs[node.name] = node
        self.tree = tree

    @cached_property
    def imports(self) -> dict[str, tuple[int, str, str | None]]:
        """name -> (level, module, imported attribute or None)."""
        return _imports(self.tree)

    def segment(self, node: ast.AST) -> str:
        first = node.lineno - 1  # type: ignore[attr-defined]
        last = node.end_lineno or node.lineno  # type: ignore[attr-defined]
        return "".join(self.lines[first:last])


_cache: dict[str, tuple[int, _Module | None]] = {}
_MAX_MODULES = 32  # parsed project files kept (the most recently used)


def _load(path: Path) -> _Module | None:
    key = str(path)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    known = _cache.pop(key, None)
    if known is None or known[0] != mtime:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            module: _Module | None = _Module(path, text, ast.parse(text, filename=key))
        except (OSError, SyntaxError, ValueError):
            module = None
        known = (mtime, module)
    _cache[key] = known  # most recent last; the least recently used goes first
    while len(_cache) > _MAX_MODULES:
        del _cache[next(iter(_cache))]
    return known[1]


def _imports(tree: ast.Module) -> dict[str, tuple[int, str, str | None]]:
    return import_specs(n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))


def import_specs(nodes: Iterable[ast.AST]) -> dict[str, tuple[int, str, str | None]]:
    """Names bound by these import statements -> (level, module, imported attribute or None)."""
    out: dict[str, tuple[int, str, str | None]] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = (0, a.name, None)
                else:
                    head = a.name.split(".")[0]
                    out.setdefault(head, (0, head, None))
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name != "*":
                    out[a.asname or a.name] = (node.level, node.module or "", a.name)
    return out


@functools.lru_cache(maxsize=512)
def _project_root(folder: Path) -> Path:
    for candidate in [folder, *list(folder.parents)[:_MAX_UP]]:
        if any((candidate / m).exists() for m in _ROOT_MARKERS):
            return candidate
    return folder


def _module_file(base: Path, dotted: str) -> Path | None:
    if not dotted:
        init = base / "__init__.py"
        return init if init.is_file() else None
    parts = dotted.split(".")
    stem = base.joinpath(*parts)
    for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _search_bases(importer: Path, level: int) -> list[Path]:
    folder = importer.parent
    if level > 0:
        for _ in range(level - 1):
            folder = folder.parent
        return [folder]
    root = _project_root(folder)
    bases = [folder]
    while folder != root and folder.parent != folder:
        folder = folder.parent
        bases.append(folder)
    return bases


def _resolve(importer: Path, level: int, module: str, attr: str | None
             ) -> tuple[Path, str | None] | None:
    """The project file an import names, and the name to read in it (None: the whole module).

    ``from pkg import models`` may name a submodule (``pkg/models.py``) or a name defined in
    ``pkg/__init__.py``; the submodule is tried first, as Python does when the package does not
    define the name itself."""
    for base in _search_bases(importer, level):
        if attr is not None:
            sub = _module_file(base, f"{module}.{attr}" if module else attr)
            if sub is not None:
                return sub, None
        found = _module_file(base, module)
        if found is not None and found != importer:
            return found, attr
    return None


def _shows(module: _Module, name: str | None, depth: int, seen: set[tuple[str, str | None]]
           ) -> bool:
    """Whether ``name`` in ``module`` (the whole file when None) shows mode-dependent modules."""
    mark = (str(module.path), name)
    if mark in seen:
        return False
    seen.add(mark)
    if name is None:
        return bool(MODE_DEPENDENT.search(module.text))
    node = module.defs.get(name)
    if node is None:
        return _through_import(module, name, depth, seen)
    if MODE_DEPENDENT.search(module.segment(node)):
        return True
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    for other in sorted(used):
        if other in module.defs and other != name:
            if _shows(module, other, depth, seen):
                return True
        elif other in module.imports and _through_import(module, other, depth, seen):
            return True
    return False


def _through_import(module: _Module, name: str, depth: int,
                    seen: set[tuple[str, str | None]]) -> bool:
    if depth <= 0 or name not in module.imports:
        return False
    level, target, attr = module.imports[name]
    resolved = _resolve(module.path, level, target, attr)
    if resolved is None:
        return False
    other = _load(resolved[0])
    return other is not None and _shows(other, resolved[1], depth - 1, seen)


def imported_builder(path: str, imports: dict[str, tuple[int, str, str | None]],
                     dotted_name: str) -> Builder | None:
    """The same-project class or function that ``dotted_name`` (``make``, ``models.Net``) names
    in the file at ``path``, whose imports are ``imports`` (see :func:`import_specs`).

    Returns None when the name is not imported from a file of the same project (a library, a
    name defined in the file itself, a path that is not a file on disk).
    """
    if not path or path.startswith("<") or path == "-":
        return None
    head, _, rest = dotted_name.partition(".")
    if head not in imports:
        return None
    importer = Path(os.path.abspath(path))
    if not importer.is_file():
        return None
    level, module, attr = imports[head]
    if attr is None:  # `import models` then `models.Net()`
        if not rest:
            return None
        module, _, rest = f"{module}.{rest}".rpartition(".")
        attr = rest
    elif rest:  # `from pkg import models` then `models.Net()`
        module, attr = (f"{module}.{attr}" if module else attr), rest
    resolved = _resolve(importer, level, module, attr)
    if resolved is None or resolved[1] is None:
        return None
    target = _load(resolved[0])
    if target is None:
        return None
    name = resolved[1]
    node = target.defs.get(name)
    if node is None:  # re-exported (`from .nets import Net` in a package's __init__)
        if name not in target.imports:
            return None
        again = _resolve(target.path, *target.imports[name])
        if again is None or again[1] is None or (target := _load(again[0])) is None:
            return None
        name = again[1]
        node = target.defs.get(name)
        if node is None:
            return None
    kind: Literal["class", "function"] = "class" if isinstance(node, ast.ClassDef) else "function"
    return Builder(path=str(target.path), name=name, kind=kind,
                   mode_dependent=_shows(target, name, _IMPORT_DEPTH, set()),
                   sets_mode=bool(_SETS_MODE.search(target.segment(node))))



_scripts: dict[str, tuple[int, object]] = {}
_MAX_SCRIPTS = 8  # parsed project files kept (the most recently used)


def project_script(path: Path) -> "Script | None":
    """The :class:`~trainguard.lint.script.Script` of another project file, parsed once per
    modification time (None when it cannot be read or parsed)."""
    from trainguard.lint.script import Script

    key = str(path)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    known = _scripts.pop(key, None)
    if known is None or known[0] != mtime:
        module = _load(path)
        script = None if module is None else Script(source=module.text, path=key,
                                                    tree=module.tree)
        known = (mtime, script)
    _scripts[key] = known  # most recent last
    while len(_scripts) > _MAX_SCRIPTS:
        del _scripts[next(iter(_scripts))]
    return known[1]  # type: ignore[return-value]


_texts: dict[str, tuple[int, str]] = {}


def imports_mention(script: "Script", word: str) -> bool:
    """Whether a project file the script imports (read as text, not parsed) contains
    ``word``: a cheap test before following calls into other files."""
    path = script.path
    if not path or path.startswith("<") or path == "-" or not script.project_imports:
        return False
    importer = Path(os.path.abspath(path))
    files = script.__dict__.get("_tg_import_files")
    if files is None:
        files = set()
        for level, module, attr in script.project_imports.values():
            resolved = _resolve(importer, level, module, attr)
            if resolved is not None:
                files.add(resolved[0])
        script.__dict__["_tg_import_files"] = files
    for file in files:
        key = str(file)
        try:
            mtime = file.stat().st_mtime_ns
        except OSError:
            continue
        known = _texts.get(key)
        if known is None or known[0] != mtime:
            try:
                known = (mtime, file.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
            _texts[key] = known
        if word in known[1]:
            return True
    return False


def cached_script(path: str, text: str) -> "Script | None":
    """The Script of the file at ``path`` if it was parsed already from this very text (a
    file that another linted file imports is then parsed once)."""
    key = _disk_key(path)
    known = _scripts.get(key) if key else None
    if known is None or known[1] is None or known[1].source != text:  # type: ignore[attr-defined]
        return None
    try:
        if Path(key).stat().st_mtime_ns != known[0]:  # type: ignore[arg-type]
            return None
    except OSError:
        return None
    return known[1]  # type: ignore[return-value]


def remember_script(path: str, script: "Script") -> None:
    """Keep the Script of a linted ``.py`` file for the files that import it."""
    key = _disk_key(path)
    if not key or not key.endswith(".py"):
        return
    try:
        mtime = Path(key).stat().st_mtime_ns
    except OSError:
        return
    if Path(key).read_bytes().decode("utf-8", errors="replace") != script.source:
        return  # the text linted is not the file on disk (standard input named after it)
    _scripts.pop(key, None)
    _scripts[key] = (mtime, script)
    while len(_scripts) > _MAX_SCRIPTS:
        del _scripts[next(iter(_scripts))]


def _disk_key(path: str) -> str | None:
    if not path or path.startswith("<") or path == "-":
        return None
    return os.path.abspath(path)


def _foreign_node(script: "Script", dotted_name: str, *, full: bool
                  ) -> tuple[Path, object, ast.AST] | None:
    """(file, its Script or _Module, the top-level class or function) that ``dotted_name``
    names in ``script`` through an import of another project file. ``full`` builds the
    file's :class:`Script`; otherwise only its parse is read (cheaper)."""
    path = script.path
    if not path or path.startswith("<") or path == "-":
        return None
    imports = script.project_imports
    head, _, rest = dotted_name.partition(".")
    if head not in imports:
        return None
    importer = Path(os.path.abspath(path))
    level, module, attr = imports[head]
    if attr is None:
        if not rest:
            return None
        module, _, attr = f"{module}.{rest}".rpartition(".")
    elif rest:
        if "." in rest:
            return None
        module, attr = (f"{module}.{attr}" if module else attr), rest
    for _ in range(3):  # follow re-exports (`from .nets import Net` in a package __init__)
        resolved = _resolve(importer, level, module, attr)
        if resolved is None or resolved[1] is None:
            return None
        parsed = _load(resolved[0])
        if parsed is None:
            return None
        name = resolved[1]
        node = parsed.defs.get(name)
        if node is not None:
            return resolved[0], (project_script(resolved[0]) if full else parsed), node
        spec = parsed.imports.get(name)
        if spec is None:
            return None
        importer = resolved[0]
        level, module, attr = spec
        if attr is None:
            return None
    return None


def foreign_constant(script: "Script", name: str) -> ast.expr | None:
    """The value of the module-level constant that ``name`` imports by name from another file of
    the project (``from settings import N_ROWS, LOADER``), when that file binds it once, at its
    top level, and never rebinds it (no ``+=``, ``global``, loop or in-place change): the
    expression as that file's :class:`Script` holds it, so its own names resolve there.
    None otherwise."""
    from trainguard.lint.consts import _assignment_table, module_constants_trusted

    path = script.path
    spec = script.project_imports.get(name)
    if not path or path.startswith("<") or path == "-" or spec is None or spec[2] is None:
        return None
    resolved = _resolve(Path(os.path.abspath(path)), *spec)
    other = project_script(resolved[0]) if resolved is not None and resolved[1] else None
    if other is None or not module_constants_trusted(other.tree, other.source):
        return None
    values = _assignment_table(other.tree).get(resolved[1], [])  # type: ignore[index,arg-type]
    value = values[0] if len(values) == 1 else None
    top = value is not None and any(isinstance(st, (ast.Assign, ast.AnnAssign)) and
                                    st.value is value for st in other.tree.body)
    return value if top else None


def foreign_method_names(script: "Script", dotted_name: str, _depth: int = 3) -> set[str]:
    """Method names of the project class ``dotted_name`` names (and of its bases in its own
    file), read from the parse alone."""
    found = _foreign_node(script, dotted_name, full=False)
    if found is None or not isinstance(found[2], ast.ClassDef):
        return set()
    module = found[1]
    out: set[str] = set()
    todo = [found[2]]
    seen: set[int] = set()
    while todo and len(seen) < 8:
        cls = todo.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        out.update(b.name for b in cls.body if isinstance(b, (ast.FunctionDef,
                                                              ast.AsyncFunctionDef)))
        for base in cls.bases:
            other = module.defs.get(base.id) if isinstance(base, ast.Name) else None  # type: ignore
            if isinstance(other, ast.ClassDef):
                todo.append(other)
    return out


def foreign_definition(script: "Script", dotted_name: str) -> object:
    """The class (as a ``ClassRef``) or function (as a ``Target``) that ``dotted_name`` names
    in ``script`` through an import of another file of the same project, or None."""
    from trainguard.lint.callgraph import ClassRef, Target

    found = _foreign_node(script, dotted_name, full=True)
    if found is None or found[1] is None:
        return None
    other, node = found[1], found[2]
    if isinstance(node, ast.ClassDef):
        return ClassRef(other, other.classes.get(node.name, node))  # type: ignore[union-attr]
    defs = [d for d in other.functions.get(node.name, ())  # type: ignore[union-attr,attr-defined]
            if other.enclosing_class(d) is None  # type: ignore[union-attr]
            and other.enclosing_function(d) is None]  # type: ignore[union-attr]
    return Target(other, defs[0]) if len(defs) == 1 else None
