"""A parsed source file for the checks that read the user's code: the parent of every node and
the calls indexed by position, and the function a code object runs (torch-free; parsed through
the bounded, cached :func:`~trainguard.sanitize.core.bounds.parse_file`)."""

from __future__ import annotations

import ast
import dis
import linecache
from types import CodeType, FunctionType

from trainguard.config import is_suppressed
from trainguard.datanames import reads_eval_data
from trainguard.sanitize.core.bounds import parse_file
from trainguard.sanitize.core.frames import is_user_code, is_user_file

__all__ = ["SourceFile", "marked", "function_node", "function_at", "attribute_store", "setter_call",
           "params_line", "param_groups_line", "param_groups_list", "last_assigned", "trains",
           "built_again", "picks_trainable", "constructed_at", "optimizer_params"]

# SourceFile per parsed tree (id -> (tree, index)): the newest few, as bounds keeps its trees
_INDEXED = 16
_indexed: dict[int, tuple[ast.Module, "SourceFile"]] = {}
_function_index: dict[int, tuple[ast.Module, dict[tuple[str, int], ast.AST]]] = {}
# the fields of a node that hold statements (and except-handlers, match cases) in lists
_BLOCKS = frozenset(("body", "orelse", "finalbody", "handlers", "cases"))


def marked(code: str, where: tuple) -> bool:
    """Whether the user's line at ``where`` (``(path, line, ...)``) carries a suppression comment
    covering ``code`` (``# trainguard: ignore[TG301]``, ``# noqa: TG301``): for a check that
    reports at the cause but honours a mark on the line where it used to report."""
    return is_suppressed(code, linecache.getline(where[0], where[1]))


def function_node(code: CodeType) -> ast.AST | None:
    """The node whose body ``code`` runs, in its user file: the module, or the function of that
    name defined at its first line (its ``def`` or first decorator); None for a file outside the
    user's code or one that does not parse."""
    if not is_user_file(code.co_filename):
        return None
    tree = parse_file(code.co_filename)
    if tree is None or code.co_name == "<module>":
        return tree
    return _functions(tree).get((code.co_name, code.co_firstlineno))


def _functions(tree: ast.Module) -> dict[tuple[str, int], ast.AST]:
    """``{(name, line): node}`` of every function of ``tree``, ``line`` being its ``def``'s and
    each decorator's (a code object's first line is its first decorator's); built once per tree
    (the newest few, as bounds keeps its trees)."""
    known = _function_index.get(id(tree))
    if known is not None and known[0] is tree:
        return known[1]
    found: dict[tuple[str, int], ast.AST] = {}
    # A function is a statement: only statements, except-handlers and match cases are walked (in
    # ast.walk's breadth-first order), not the expressions that make most of a file's nodes
    todo: list[ast.AST] = [tree]
    for node in todo:  # (the list grows as it is read)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for line in (node.lineno, *(d.lineno for d in node.decorator_list)):
                found.setdefault((node.name, line), node)
        for name in node._fields:
            if name in _BLOCKS:
                todo.extend(getattr(node, name, None) or ())
    if len(_function_index) >= _INDEXED:
        _function_index.pop(next(iter(_function_index)))
    _function_index[id(tree)] = (tree, found)
    return found


class SourceFile:
    """A parsed source file: parents of every node and the calls indexed by position."""

    def __init__(self, tree: ast.Module) -> None:
        parents: dict[ast.AST, ast.AST] = {}
        calls: dict[tuple[int, int], list[ast.Call]] = {}
        self.parents, self.calls = parents, calls
        # ast.walk's order and iter_child_nodes' children without their three generators per
        # node (a 400-line file has some 3,500 nodes): a third of the opcodes
        AST, Call = ast.AST, ast.Call
        todo: list[ast.AST] = [tree]
        for node in todo:  # (the list grows as it is read)
            for name in node._fields:
                value = getattr(node, name, None)
                if isinstance(value, list):
                    for item in value:
                        if isinstance(item, AST):
                            parents[item] = node
                            todo.append(item)
                elif isinstance(value, AST):
                    parents[value] = node
                    todo.append(value)
            if isinstance(node, Call):
                calls.setdefault((node.lineno, node.col_offset), []).append(node)

    @classmethod
    def load(cls, path: str) -> "SourceFile | None":
        """The file at ``path`` parsed (None when it has no source, is not valid Python or is
        longer than ``bounds.SOURCE_CHARS``). One per parsed tree: a file saved from every epoch
        (a checkpoint helper) is indexed once while its source is unchanged."""
        linecache.checkcache(path)
        return cls.of(parse_file(path))

    @classmethod
    def of(cls, tree: ast.Module | None) -> "SourceFile | None":
        """The index of ``tree`` (a tree from ``parse_file``, whose cache keeps it while the file
        is unchanged), built once; None for None."""
        if tree is None:
            return None
        known = _indexed.get(id(tree))
        if known is not None and known[0] is tree:
            return known[1]
        if len(_indexed) >= _INDEXED:
            _indexed.pop(next(iter(_indexed)))
        file = cls(tree)
        _indexed[id(tree)] = (tree, file)
        return file

    def call_at(self, line: int, col0: int) -> ast.Call | None:
        """The innermost call starting at ``line``/``col0`` (``model(x)`` in ``model(x).argmax()``,
        which starts at the same place)."""
        found = self.calls.get((line, col0))
        if not found:
            return None
        return min(found, key=lambda c: ((c.end_lineno or 0) - c.lineno, c.end_col_offset or 0))

    def scope(self, node: ast.AST) -> ast.AST:
        """The function (or module) whose body holds ``node``."""
        cur = self.parents.get(node)
        while cur is not None and not isinstance(
                cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)):
            cur = self.parents.get(cur)
        return cur if cur is not None else node

    def loop(self, node: ast.AST, scope: ast.AST) -> ast.AST | None:
        """The innermost ``for``/``while`` around ``node`` inside ``scope``."""
        cur = self.parents.get(node)
        while cur is not None and cur is not scope:
            if isinstance(cur, (ast.For, ast.AsyncFor, ast.While)):
                return cur
            cur = self.parents.get(cur)
        return None

    def in_eval_block(self, node: ast.AST, region: ast.AST) -> bool:
        """Whether an ``if``/``with`` block around ``node`` inside ``region`` (a training loop)
        reads evaluation data and trains nothing: a test batch scored every k steps
        (fxia22/pointnet.pytorch#19)."""
        cur = self.parents.get(node)
        while cur is not None and cur is not region:
            if isinstance(cur, (ast.If, ast.With)) and reads_eval_data(cur) and not trains(cur):
                return True
            cur = self.parents.get(cur)
        return False


def attribute_store(cls: type, attr: str) -> tuple[str, int, int] | None:
    """``(path, line, column)`` of the user's statement that stores ``self.<attr>`` in ``cls``
    (its ``__init__`` first, then its other methods, through its bases): where an attribute's
    value was made (a generator every DataLoader worker copies, a tensor ``.to()`` does not move).
    None when no user code of the class stores it."""
    found = _first_store(cls, attr)
    if found is None:
        return None
    function, line, col = found
    return (function.__code__.co_filename, line, col)


def stored_in_init(cls: type, attr: str) -> bool:
    """Whether the user method that :func:`attribute_store` finds storing ``self.<attr>`` is an
    ``__init__``; False when another method stores it (a setter such as
    ``set_random_state(seed)``) or nothing does."""
    found = _first_store(cls, attr)
    return found is not None and found[0].__name__ == "__init__"


def setter_call(cls: type, attr: str) -> tuple[str, int, int] | None:
    """For ``self.<attr>`` stored by a method other than ``__init__`` (a mixin's setter,
    ``set_random_state(seed)``), the ``self.set_random_state(...)`` call in the class's user
    ``__init__`` that runs it: the line of the class that made the value. None otherwise."""
    found = _first_store(cls, attr)
    if found is None or found[0].__name__ == "__init__":
        return None
    setter = found[0].__name__
    init = getattr(cls, "__init__", None)
    code = getattr(init, "__code__", None)
    node = function_node(code) if code is not None and is_user_code(code) else None
    if not isinstance(node, ast.FunctionDef):
        return None
    calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)
             and isinstance(c.func, ast.Attribute) and c.func.attr == setter
             and isinstance(c.func.value, ast.Name) and c.func.value.id == "self"]
    if len(calls) != 1:
        return None
    return (code.co_filename, calls[0].lineno, calls[0].col_offset + 1)


def _first_store(cls: type, attr: str) -> tuple[FunctionType, int, int] | None:
    for klass in cls.__mro__:
        functions = [f for f in vars(klass).values() if isinstance(f, FunctionType)]
        functions.sort(key=lambda f: f.__name__ != "__init__")
        for function in functions:
            code = function.__code__
            if not is_user_code(code):
                continue
            for ins in dis.get_instructions(code):
                if ins.opname == "STORE_ATTR" and ins.argval == attr:
                    line = ins.positions.lineno if ins.positions else None
                    if line:
                        return function, line, (ins.positions.col_offset or 0) + 1
    return None


def optimizer_params(where: tuple[str, int, int], *, spread: bool
                      ) -> tuple[ast.Module, "SourceFile", ast.Call, ast.expr | None] | None:
    """(the file's tree, its index, the optimizer's construction at ``where``, what it is given
    as ``params``: the first argument, ``params=``, and with ``spread`` a ``**options``)."""
    tree = parse_file(where[0])
    file = SourceFile.of(tree)
    call = file.call_at(where[1], where[2] - 1) if tree is not None and file is not None else None
    if call is None:
        return None
    arg = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == "params"),
        next((k.value for k in call.keywords if k.arg is None and spread), None))
    return tree, file, call, arg


def params_line(where: tuple[str, int, int]) -> int | None:
    """The line where the ``params`` given to the optimizer built by the call at ``where`` are
    written: the statement of the same function that assigns the name passed
    (``params_disc = list(a.parameters()) + list(b.parameters())``), else the argument itself.
    None when the call is not found."""
    found = optimizer_params(where, spread=False)
    if found is None:
        return None
    _, file, call, arg = found
    if isinstance(arg, ast.Name):
        stores = [n for n in ast.walk(file.scope(call)) if isinstance(n, ast.Assign) and
                  n.lineno < call.lineno and any(isinstance(t, ast.Name) and t.id == arg.id
                                                 for t in n.targets)]
        if stores:
            return max(stores, key=lambda n: n.lineno).lineno
    return arg.lineno if arg is not None else call.lineno


def param_groups_line(where: tuple[str, int, int]) -> int | None:
    """The line of the last parameter group listed for the optimizer built by the call at
    ``where``, when its ``params`` are groups written out in the source: a list of dicts given
    to the call (``AdamW([{"params": ...}, ...])``), assigned to the name given (``groups =
    [...]``) in the same function, or returned (directly or through a name) by a function of the
    same file that the call calls (``AdamW(get_param_groups(model, args))``, also through a name
    assigned from that call in the same function, or a method the
    file defines once: ``AdamW(model.get_optimizer_parameters(config))``; or the ``params`` entry
    of the options such a function returns: ``Adam(**get_params_options(args, model))`` returning
    ``dict(params=groups, lr=...)``). That list is where a
    module left out of every group belongs. None otherwise."""
    found = param_groups_list(where)
    return found[0].elts[-1].lineno if found is not None else None


def param_groups_list(where: tuple[str, int, int]) -> tuple[ast.List, ast.AST] | None:
    """The list of group dicts written out for the optimizer built by the call at ``where``, as
    :func:`param_groups_line` finds it, with the function (or module) that writes it."""
    found = optimizer_params(where, spread=True)
    if found is None:
        return None
    tree, file, call, arg = found
    scope = file.scope(call)
    if isinstance(arg, ast.Name):  # groups = get_optimizer_parameters(model, cfg); AdamW(groups)
        value = last_assigned(scope, arg.id, call.lineno, (ast.Call,))
        if isinstance(value, ast.Call) and not (isinstance(value.func, ast.Name)
                                                and value.func.id == "dict"):
            arg = value
    if isinstance(arg, ast.Call) and isinstance(arg.func, (ast.Name, ast.Attribute)):
        if isinstance(arg.func, ast.Name):
            found = [n for n in tree.body if isinstance(n, ast.FunctionDef)
                     and n.name == arg.func.id]
        else:
            found = [n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body
                     if isinstance(n, ast.FunctionDef) and n.name == arg.func.attr]
        scope = found[0] if len(found) == 1 else None
        if scope is None:
            return None
        returned = [n.value for n in ast.walk(scope) if isinstance(n, ast.Return)]
        arg = _params_entry(returned[-1]) if len(returned) == 1 else None
    if isinstance(arg, ast.Name):  # (``Adam(**options)`` with ``options = dict(params=[...])``)
        arg = _params_entry(last_assigned(scope, arg.id, call.lineno if scope is
                                          file.scope(call) else None, (ast.List, ast.Call,
                                                                       ast.Dict)))
    if isinstance(arg, ast.List) and arg.elts and all(isinstance(e, ast.Dict) for e in arg.elts):
        return arg, scope
    return None


def _params_entry(value: ast.AST | None) -> ast.AST | None:
    """The ``params`` entry of an optimizer's keyword options written as ``dict(params=...)`` or
    ``{"params": ...}`` (given as ``Adam(**options)``); else ``value`` itself."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
        return next((k.value for k in value.keywords if k.arg == "params"), value)
    if isinstance(value, ast.Dict):
        return next((v for k, v in zip(value.keys, value.values)
                     if isinstance(k, ast.Constant) and k.value == "params"), value)
    return value


def last_assigned(scope: ast.AST, name: str, before: int | None,
                  kinds: tuple[type, ...]) -> ast.AST | None:
    """The value of the last ``name = <value>`` in ``scope`` (at or before line ``before``, when
    given) whose value is one of ``kinds`` (``ast.List``, ``ast.Dict``...), or None."""
    found = None
    for node in ast.walk(scope):
        if (isinstance(node, ast.Assign) and isinstance(node.value, kinds)
                and (before is None or node.lineno <= before)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)):
            if found is None or node.lineno >= found.lineno:
                found = node
    return found.value if found is not None else None


def function_at(path: str, line: int) -> ast.AST | None:
    """The innermost function of file ``path`` whose body holds ``line`` (the module when none)."""
    tree = parse_file(path)
    if tree is None:
        return None
    best: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.lineno <= line <= (node.end_lineno or node.lineno) \
                and node.lineno >= getattr(best, "lineno", 0):
            best = node
    return best


_TRAIN_CALLS = frozenset(("backward", "step", "manual_backward"))


def trains(node: ast.AST) -> bool:
    """Whether the code under ``node`` calls ``backward``, a ``step`` or ``autograd.grad``."""
    for n in ast.walk(node):
        f = n.func if isinstance(n, ast.Call) else None
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in _TRAIN_CALLS or name == "grad" and "autograd" in ast.unparse(f):
            return True
    return False


def built_again(where: tuple[str, int, int], class_name: str) -> int | None:
    """The line, after ``where`` (an optimizer's construction) in the same function or module
    code, of the one call building ``class_name`` (``rnn = RNN(...)`` again, a notebook cell
    run after the one that built the optimizer), else of the one assignment rebinding the name
    whose ``.parameters()`` the optimizer was given (``net = widen(net, 32)``), or None."""
    tree = parse_file(where[0])
    file = SourceFile.of(tree)
    call = file.call_at(where[1], where[2] - 1) if tree is not None and file is not None else None
    if call is None:
        return None
    scope = file.scope(call)
    lines = {n.lineno for n in ast.walk(scope) if isinstance(n, ast.Call) and n.lineno > call.lineno
             and (getattr(n.func, "id", None) or getattr(n.func, "attr", None)) == class_name
             and file.scope(n) is scope}
    if not lines:  # the model name the optimizer took parameters from, rebound by a helper
        names = {n.func.value.id for n in ast.walk(call) if isinstance(n, ast.Call) and
                 isinstance(n.func, ast.Attribute) and n.func.attr == "parameters" and
                 isinstance(n.func.value, ast.Name)}  # (``net = widen(net, 32)``)
        lines = {n.lineno for n in ast.walk(scope) if isinstance(n, ast.Assign) and
                 n.lineno > call.lineno and file.scope(n) is scope and
                 any(isinstance(t, ast.Name) and t.id in names for t in n.targets)}
    return lines.pop() if len(lines) == 1 else None


def picks_trainable(built: tuple[str, int, int]) -> bool:
    """The ``params`` of the optimizer built at ``built`` are filtered on ``requires_grad``."""
    line = params_line(built)
    return line is not None and "requires_grad" in linecache.getline(built[0], line)


def constructed_at(paths: list[str], class_name: str,
                   keyword: str | None = None) -> tuple[str, int, int] | None:
    """The one call building ``class_name`` (``ReportMgr(opt["log_file"])``; with ``keyword``,
    one passing it: ``nn.CrossEntropyLoss(weight=w)``) in the files ``paths``, as ``(path,
    line, column)``; None when there is none or more than one."""
    found = []
    for path in dict.fromkeys(paths):
        tree = parse_file(path)
        if tree is None:
            continue
        found += [(path, n.lineno, n.col_offset + 1) for n in ast.walk(tree)
                  if isinstance(n, ast.Call) and
                  (getattr(n.func, "id", None) or getattr(n.func, "attr", None)) == class_name
                  and (keyword is None or any(k.arg == keyword for k in n.keywords))]
        if len(found) > 1:
            return None
    return found[0] if found else None
