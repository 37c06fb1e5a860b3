"""TG602 save-on-every-rank: every rank writes the same checkpoint or log file.

Under DDP every process runs the script; an unguarded ``torch.save(path)`` or TensorBoard
``SummaryWriter`` has all ranks write the same file at once, which can leave it corrupt or the
log interleaved
(https://pytorch.org/tutorials/intermediate/ddp_tutorial.html#save-and-load-checkpoints).
Only in files that set up ``torch.distributed``. Silent for writes guarded by a rank check, a
``master_process``/``is_main_process`` flag or a flag set from the rank
(``save_to_disk=get_rank() == 0``), an early ``return`` on non-zero ranks or a
``raise`` unless the world size is 1 (a single-process hook), under ``if saver is not None:``
for an object made on one rank only (``saver = Saver(...) if is_primary(args) else None``), inside
helpers such as ``save_on_master`` or ``@rank_zero_only``, for per-rank file names, and for the
distributed checkpoint API that every rank must call. A periodic test (``epoch % k == 0``)
is no rank check. A write inside a helper of the file is reported at its first unguarded call,
where the rank check goes, unless the helper takes the rank (``rank``, ``is_main_process``) and
never reads it: the check belongs in the helper, at its write; a write inside a function of another
project file is reported at the unguarded call of that function. A helper that takes the rank,
never reads it and returns to every rank a new object of a class of the file that writes a file
(``open(path, "a")`` too, in its methods) is reported at that ``return``. An object of a
class that opens a file to write in a method the file calls (``JsonlWriter(log_dir)`` with
``open(self.path, "a")`` in ``add_scalar``), built unguarded in a process-group worker, is
reported at its construction when ``__init__`` opens the file, else at the first unguarded call
of the writing method (silent when all are guarded; the construction again when that call
tests that the object exists, ``if self.writer is not None:``); a log the worker writes itself
(``open(lcurve, "a")``, ``np.save``) is reported at the write (:func:`_log_write`).
A per-node rank test that holds in every process the file starts on this host (``local_rank ==
0`` with 0 passed by every call, in a worker ``mp.spawn`` runs) is no rank check either
(:func:`_holds_on_every_rank`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trainguard.lint.astutil import SCOPES, dotted, kwarg, parent, walk_local
from trainguard.lint.branches import param_env
from trainguard.lint.consts import const_eval
from trainguard.lint.dataflow import last_assignment, scope_of
from trainguard.lint.ranks import on_every_rank
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG602"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_DISTRIBUTED = re.compile(r"init_process_group|DistributedDataParallel|\bDDP\(")
# ``if dist.get_world_size() != 1: raise ...``: what follows runs in a single process
_WORLD = re.compile(r"world_size|num_processes|WORLD_SIZE|num_replicas", re.I)
_GUARD = re.compile(r"rank|master|main_process|is_main|primary|zero|is_root|local_main|"
                    r"process_index|is_chief|leader|gpu_id|device_id|==\s*0\b", re.I)
_RANKED = re.compile(r"rank(\b|_)|process_index", re.I)  # (a value read from the rank)


def check(script: Script) -> Iterator[Hit]:
    if not _DISTRIBUTED.search(script.source):
        return
    for call in script.calls:
        target = _written_path(script, call) or _log_write(script, call)
        if target is None:
            continue
        what, path = target
        path_text = ast.unparse(path) if path is not None else "its default folder"
        if _GUARD.search(path_text) or _guarded(script, call, frozenset()) or \
                path is not None and _per_rank_path(path, call, 3):
            continue
        site, helper = _unguarded_site(script, call)
        if site is not None:
            yield Hit(site, f"{helper}() runs {what} {path_text} (at {script.at(call.lineno)}) "
                            f"on every rank{_vacuous_guard(script, site)}: all processes write "
                            f"the same file")
            continue
        func = script.enclosing_function(call)
        unread = f": {func.name}() takes the rank but never tests it" \
            if func is not None and _unread_rank(func) else ""
        yield Hit(call, f"{what} {path_text} runs on every rank{_vacuous_guard(script, call)}: "
                        f"all processes write the same file{unread}")
    yield from _project_writers(script)
    yield from _rank_blind_factories(script)
    yield from _writers_built_on_every_rank(script)


def _writers_built_on_every_rank(script: Script) -> Iterator[Hit]:
    """``writer = JsonlWriter(log_dir)`` in a process-group worker, where ``JsonlWriter`` (a
    class of the file or the project) has a method, called somewhere in the file, that opens a
    file for writing or appending (``open(self.path, "a")`` in ``add_scalar``): each rank builds
    its own writer of the same file. A writer that opens its file in ``__init__`` is reported at
    the construction, where the rank check goes; one that opens it in another method writes
    where that method is called (:func:`_unguarded_write_call`), and is reported at the first
    such call made on every rank, silent when each call is guarded (``if rank == 0:
    writer.log(...)``). Silent when the construction is guarded (``JsonlWriter(d) if rank == 0
    else None``), given a per-rank path or the rank, when the class reads the rank itself, and
    outside a process group's workers."""
    called = {c.func.attr for c in script.calls if isinstance(c.func, ast.Attribute)}
    for call in script.calls:
        ref = script.graph.class_named(dotted(call.func))
        if ref is None:
            continue
        write = _opening_method(ref.script, ref.node, called)
        func = script.enclosing_function(call)
        if write is None or _RANK_AWARE.search(ast.unparse(ref.node)) or \
                isinstance(parent(call), ast.Return) and func is not None and _unread_rank(func):
            continue  # (a factory handed the rank: _rank_blind_factories)
        args = [*call.args, *(k.value for k in call.keywords)]
        if any(_GUARD.search(ast.unparse(a)) or _per_rank_path(a, call, 3) for a in args) or \
                _guarded(script, call, frozenset()) or not on_every_rank(script, call, 3):
            continue
        what, at, method = write
        where = script.at(at) if ref.script is script else \
            f"{ref.script.path.rsplit('/', 1)[-1]}:{at}"
        site = _unguarded_write_call(script, call, method) \
            if method.name != "__init__" and ref.script is script else call
        if site is None:
            continue
        if site is not call:
            yield Hit(site, f"{ast.unparse(site.func)}() writes the file of the "
                            f"{ref.node.name} built at {script.at(call.lineno)} with {what} (at "
                            f"{where}) on every rank: all processes write the same file",
                      fix=f"call it on rank 0 only (if rank == 0:), or build the "
                          f"{ref.node.name} on rank 0 only")
            continue
        yield Hit(call, f"{ref.node.name}(...) is built on every rank of the process group and "
                        f"writes a file with {what} (at {where}): all processes write the same "
                        f"file",
                  fix=f"build it on rank 0 only ({ref.node.name}(...) if rank == 0 else None) "
                      f"or give each rank a file of its own")


def _unguarded_write_call(script: Script, built: ast.Call,
                          method: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Call | None:
    """The first call of the writing ``method`` on the object ``built`` makes (``logger.log(...)``
    after ``logger = MetricsLogger(run_dir)``; any call of the method when none is made through
    the name it is bound to) that no rank check guards; None when every call is guarded, and
    ``built`` itself when the file makes no call the call graph can place."""
    sites = script.call_sites(method)
    bound = parent(built)
    key = script.key(bound.targets[0]) if isinstance(bound, ast.Assign) and \
        len(bound.targets) == 1 else None
    own = [s for s in sites if isinstance(s.func, ast.Attribute) and key is not None and
           script.key(s.func.value) == key]
    if not (own or sites):
        return built
    site = next((s for s in own or sites if not _guarded(script, s, frozenset())), None)
    return built if site is not None and _optional_receiver(site) else site


def _optional_receiver(call: ast.Call) -> bool:
    """``call`` sits under a test that its receiver exists (``if self.writer is not None:
    self.writer.add_scalar(...)``, ``if logger:``): the code expects the object on some ranks
    only, so building it on every rank is what to change."""
    recv = ast.unparse(call.func.value) if isinstance(call.func, ast.Attribute) else None
    n: ast.AST | None = call
    while recv is not None and (n := parent(n)) is not None and not isinstance(n, SCOPES):
        test = n.test if isinstance(n, ast.If) else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and \
                isinstance(test.ops[0], ast.IsNot) and \
                isinstance(test.comparators[0], ast.Constant) and \
                test.comparators[0].value is None:
            test = test.left
        if test is not None and ast.unparse(test) == recv:
            return True
    return False


# a writer class that decides by the rank itself (``if dist.get_rank() != 0: return``)
_RANK_AWARE = re.compile(r"rank|main_process|is_main|master|primary|process_index", re.I)


def _opening_method(script: Script, cls: ast.ClassDef, called: set[str]
                    ) -> tuple[str, int, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """``(call, line, method)`` of an ``open(path, "w"/"a")`` in ``__init__`` or in a method of
    ``cls`` that the linted file calls (``writer.add_scalar(...)``); None when none opens a file
    to write. (A ``torch.save`` or ``SummaryWriter`` in a method is reported where it is.)"""
    for m in cls.body:
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                (m.name == "__init__" or m.name in called):
            found = _class_write(script, m)
            if found is not None and found[0].startswith("open("):
                return (*found, m)
    return None


def _rank_blind_factories(script: Script) -> Iterator[Hit]:
    """``def build_report_manager(opt, rank): return ReportMgr(opt["log_file"])``: a helper
    handed the rank (to make the writer on one rank only) that never reads it, and returns to
    every rank a new object of a class of the file whose methods write a file (``open(path,
    "a")``, ``torch.save``, a ``SummaryWriter``), not one per rank. Reported at that
    ``return``; silent when every call of the helper is itself guarded by a rank check."""
    for funcs in script.functions.values():
        for func in funcs:
            if script.enclosing_class(func) is not None or not _unread_rank(func):
                continue
            sites = script.call_sites(func)
            if not sites or all(_guarded(script, s, frozenset()) for s in sites):
                continue
            for ret in (n for n in ast.walk(func) if isinstance(n, ast.Return)):
                made = ret.value
                cls = script.classes.get(dotted(made.func) or "") \
                    if isinstance(made, ast.Call) else None
                write = _class_write(script, cls) if cls is not None else None
                if cls is None or write is None or any(_per_rank_path(a, ret, 3) for a in [
                        *made.args, *(k.value for k in made.keywords)]):  # type: ignore
                    continue
                what, at = write
                yield Hit(ret, f"{func.name}() takes the rank but never tests it, and returns "
                               f"a {cls.name} to every rank, which writes a file with {what} "
                               f"(at {script.at(at)}): all processes write the same file")
                break


def _class_write(script: Script, cls: ast.AST) -> tuple[str, int] | None:
    """``(call, line)`` of the first write to a file in a method of ``cls`` (or in one method):
    ``open(path, "w"/"a")``, ``torch.save``, a ``SummaryWriter``; None when it writes nothing."""
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call):
            continue
        written = _written_path(script, node)
        if written is not None:
            return written[0].split(" ", 1)[0], node.lineno
        mode = node.args[1] if len(node.args) > 1 else kwarg(node, "mode")
        if dotted(node.func) == "open" and isinstance(mode, ast.Constant) and \
                isinstance(mode.value, str) and set(mode.value) & {"w", "a"}:
            return f"open(..., {mode.value!r})", node.lineno
    return None


def _per_rank_path(path: ast.expr, at: ast.AST, depth: int) -> bool:
    """The path is built, through names assigned above ``at`` in its function, from the rank
    (``ckpt = os.path.join(root, f"node{rank}")``, ``d = run_dir(root, rank)``): each rank
    writes a file of its own."""
    if depth <= 0:
        return False
    for n in ast.walk(path):
        if isinstance(n, ast.Name):
            value = last_assignment(n.id, at)
            if value is not None and (_RANKED.search(ast.unparse(value)) or
                                      _per_rank_path(value, at, depth - 1)):
                return True
    return False


def _unguarded_site(script: Script, write: ast.Call) -> tuple[ast.Call | None, str]:
    """A write that a helper of this file (``save_checkpoint(state, out_dir)``) makes each time
    it runs, outside any test or loop of its own, is the caller's to guard: the first call of it made on every rank, where
    the rank check goes (None when the write is not in such a helper)."""
    func = script.enclosing_function(write)
    if func is None or script.enclosing_class(write) is not None and \
            func.name.startswith("__"):
        return None, ""
    n = parent(write)
    while n is not None and n is not func:
        if isinstance(n, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try)):
            return None, ""  # a write under its own test or loop: the guard goes there
        n = parent(n)
    if _unread_rank(func):
        return None, ""  # handed the rank to test and never reads it: the guard goes here
    sites = script.call_sites(func)
    unguarded = [s for s in sites if not _guarded(script, s, frozenset({id(func)}))]
    if not sites or not unguarded or script.enclosing_function(unguarded[0]) is func or \
            _dispatched(unguarded[0]):
        return None, ""
    return unguarded[0], func.name


def _unread_rank(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``def save_checkpoint(out_dir, epoch, model, opt, rank)``: the helper takes the rank (or
    a main-process flag) and nothing in it reads that parameter, so the check that was meant
    to use it is missing from the helper itself."""
    args = func.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]
              if re.fullmatch(r"(global_|local_)?rank|is_(main|master)(_process)?|"
                              r"master_process", a.arg)}
    read = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)}
    return bool(params - read)


def _dispatched(call: ast.Call) -> bool:
    """``cb.on_epoch_end(...)`` inside ``for cb in self.callbacks:``: a line that serves every
    callback, so the rank check belongs in the callback that writes."""
    recv = call.func.value if isinstance(call.func, ast.Attribute) else None
    if not isinstance(recv, ast.Name):
        return False
    n = parent(call)
    while n is not None and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.Lambda, ast.Module)):
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and \
                isinstance(n.target, ast.Name) and n.target.id == recv.id:
            return True
        n = parent(n)
    return False


def _project_writers(script: Script) -> Iterator[Hit]:
    """A call of a function from another file of the project that writes the file itself
    (``save_checkpoint(ckpt_path, model, optimizer, epoch)`` from ``helpers.py``), made
    unguarded on every rank: reported at the call, where the rank check goes."""
    if not script.project_imports:
        return
    imported = set(script.project_imports)
    for call in script.calls:
        root = call.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in imported):
            continue  # only names imported from the project can run another file's code
        for t in script.targets(call):
            if t.script is script or t.instance:
                continue
            written = _writes(t.script, t.func)
            if written is None:
                continue
            what, path = written
            path = _argument_for(t.func, call, path)
            path_text = ast.unparse(path) if path is not None else "its default folder"
            if _GUARD.search(path_text) or _guarded(script, call, frozenset()) or \
                path is not None and _per_rank_path(path, call, 3):
                break
            name = getattr(t.func, "name", "the helper")
            yield Hit(call, f"{name}() runs {what} {path_text} on every rank: all processes "
                            f"write the same file")
            break


def _writes(script: Script, func: ast.AST) -> tuple[str, ast.expr | None] | None:
    """The first unguarded write in ``func`` itself: ``(what, path)``."""
    if _GUARD.search(getattr(func, "name", "")) or any(
            _GUARD.search(ast.unparse(d)) for d in getattr(func, "decorator_list", [])):
        return None
    for sub in ast.walk(func):
        if isinstance(sub, ast.Call):
            written = _written_path(script, sub)
            if written is not None and not _guarded(script, sub, frozenset({id(func)})):
                return written
    return None


def _argument_for(func: ast.AST, call: ast.Call, path: ast.expr | None) -> ast.expr | None:
    """The caller's argument behind a path built from a parameter (``tmp = path + ".tmp"``)."""
    if path is None:
        return None
    params = [a.arg for a in func.args.posonlyargs + func.args.args]  # type: ignore[attr-defined]
    names = {n.id for n in ast.walk(path) if isinstance(n, ast.Name)}
    for sub in ast.walk(func):
        if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names
                                               for t in sub.targets):
            names |= {n.id for n in ast.walk(sub.value) if isinstance(n, ast.Name)}
    from trainguard.lint.callgraph import bind_arguments

    bound = bind_arguments(params, call)
    for p in params:
        if p in names and p in bound:
            return bound[p]
    return path


def _written_path(script: Script, call: ast.Call) -> tuple[str, ast.expr | None] | None:
    """(what, path) for ``torch.save(obj, path)`` and a TensorBoard ``SummaryWriter(log_dir)``;
    None for anything else. Plain ``open(path, "w")`` is left out: scripts often rule out DDP for
    a code path by an assertion elsewhere (yolov5's ``--evolve``), which a reader of one call
    cannot see."""
    q = script.call_qualname(call) or ""
    if q == "torch.save" and len(call.args) >= 2:
        return "torch.save(...) to", call.args[1]
    if q.endswith("tensorboard.SummaryWriter") or q == "tensorboardX.SummaryWriter":
        log_dir = call.args[0] if call.args else kwarg(call, "log_dir")
        return "SummaryWriter for", log_dir
    return None


_SAVES_ARRAY = ("numpy.save", "numpy.savetxt", "numpy.savez", "numpy.savez_compressed")
# a name made unique to the process: a temporary file, the process id, a random id
_UNIQUE = re.compile(r"mkstemp|mkdtemp|NamedTemporaryFile|TemporaryDirectory|getpid|uuid|"
                     r"devnull|/dev/null")


def _log_write(script: Script, call: ast.Call) -> tuple[str, ast.expr | None] | None:
    """(what, path) for ``open(path, "w"/"a")`` and ``np.save(path, ...)`` (a learning curve,
    a metrics file) in a function of the file that runs in each process of a process group
    (:func:`on_every_rank`: it joins the group, ``mp.spawn`` runs it, or it is called from
    those) or at the top level of a script that joins the group there; None in a method of a
    class (a writer class built on every rank is reported where it is built). Code the program
    keeps to one process (``assert world_size == 1``, ``if dist.get_world_size() > 1: return``)
    stays silent."""
    q = script.call_qualname(call) or ""
    if q in _SAVES_ARRAY and call.args:
        what, path = f"np.{q.rsplit('.', 1)[-1]}(...) to", call.args[0]
    elif dotted(call.func) == "open" and call.args:
        mode = call.args[1] if len(call.args) > 1 else kwarg(call, "mode")
        if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str) and
                set(mode.value) & {"w", "a", "x"}):
            return None
        what, path = f"open(..., {mode.value!r}) of", call.args[0]
    else:
        return None
    if script.enclosing_class(call) is not None or _unique_to_process(path) or \
            _single_process(script, call) or not on_every_rank(script, call, 3):
        return None
    return what, path


def _unique_to_process(path: ast.expr) -> bool:
    """The path names a file of this process's own: a temporary file or the process id in it,
    written there or bound to one of its names in the scope (``fd, tmp = tempfile.mkstemp()``,
    ``with NamedTemporaryFile("w") as f``)."""
    if _UNIQUE.search(ast.unparse(path)):
        return True
    names = {n.id for n in ast.walk(path) if isinstance(n, ast.Name)}
    for sub in walk_local(scope_of(path)):
        bound = [(t, sub.value) for t in sub.targets] if isinstance(sub, ast.Assign) else \
            [(sub.optional_vars, sub.context_expr)] if isinstance(sub, ast.withitem) and \
            sub.optional_vars is not None else []
        if any(names & {n.id for n in ast.walk(t) if isinstance(n, ast.Name)} and
               _UNIQUE.search(ast.unparse(v)) for t, v in bound):
            return True
    return False


_DDP_FLAG = re.compile(r"distributed|ddp|is_dist", re.I)


def _single_process(script: Script, node: ast.AST) -> bool:
    """An ``assert`` above ``node`` in a block around it that keeps the code to one process
    (``assert LOCAL_RANK == -1, "not for DDP"``, ``assert world_size == 1``), or a branch taken
    when the run is not distributed (``if not args.distributed:``, the ``else`` of ``if
    ddp:``)."""
    n = node
    while (p := parent(n)) is not None and not isinstance(p, ast.Module):
        if isinstance(p, ast.If) and _DDP_FLAG.search(ast.unparse(p.test)) and \
                (n in p.orelse) != (isinstance(p.test, ast.UnaryOp) and
                                    isinstance(p.test.op, ast.Not)):
            return True
        body = getattr(p, "body", None)
        for block in (body, getattr(p, "orelse", None)):
            if isinstance(block, list) and n in block and any(
                    isinstance(s, ast.Assert) and (_rank_test(s.test) or
                                                   _WORLD.search(ast.unparse(s.test)))
                    for s in block[:block.index(n)]):
                return True
        n = p
    return False


def _guarded(script: Script, node: ast.AST, seen: frozenset[int]) -> bool:
    n = node
    while (p := parent(n)) is not None:
        if isinstance(p, (ast.If, ast.IfExp)) and (_rank_cond(script, p.test) or
                                                   _made_on_one_rank(script, p.test)):
            return True
        if isinstance(p, ast.Assert) and _rank_cond(script, p.test):
            return True
        if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _GUARD.search(p.name) or any(_GUARD.search(ast.unparse(d))
                                            for d in p.decorator_list):
                return True
            if _early_return_block(script, p, n):
                return True
            sites = list(script.call_sites(p)) + _handed_calls(script, p)
            if id(p) in seen or not sites:
                return False
            return all(_guarded(script, s, seen | {id(p)}) for s in sites)
        if isinstance(p, SCOPES):
            return False
        if _early_return_block(script, p, n):
            return True
        n = p
    return False


def _handed_calls(script: Script, func: ast.FunctionDef | ast.AsyncFunctionDef
                  ) -> list[ast.Call]:
    """Where ``func`` runs when it is handed to another function of the file
    (``run_on_main(checkpointer.save_checkpoint, meta)``): that function's calls of the
    parameter it receives it in (``if if_main_process(): func(*args)``)."""
    out: list[ast.Call] = []
    for call in script.calls:
        for i, arg in enumerate(call.args):
            name = arg.attr if isinstance(arg, ast.Attribute) else \
                arg.id if isinstance(arg, ast.Name) else None
            if name != func.name:
                continue
            for t in script.targets(call)[:2]:
                if t.script is not script:
                    continue
                params = [a.arg for a in t.func.args.posonlyargs + t.func.args.args]
                if t.bound and params:
                    params = params[1:]
                if i < len(params):
                    out += [c for c in ast.walk(t.func) if isinstance(c, ast.Call) and
                            isinstance(c.func, ast.Name) and c.func.id == params[i]]
    return out


def _early_return_block(script: Script, block_owner: ast.AST, child: ast.AST) -> bool:
    body = getattr(block_owner, "body", None)
    if not isinstance(body, list) or child not in body:
        return False
    for s in body[:body.index(child)]:
        if isinstance(s, ast.If) and (_rank_cond(script, s.test) or
                                      _WORLD.search(ast.unparse(s.test))) and any(
                isinstance(x, (ast.Return, ast.Continue, ast.Raise)) for x in s.body):
            return True
    return False


def _made_on_one_rank(script: Script, test: ast.AST) -> bool:
    """``if saver is not None:`` (or ``if saver:``) where every value of ``saver`` is made on
    one rank only (``saver = CheckpointSaver(...) if is_primary(args) else None``: timm's
    train.py): the test holds on that rank alone."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and \
            isinstance(test.ops[0], ast.IsNot) and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None:
        test = test.left
    key = script.key(test) if isinstance(test, (ast.Name, ast.Attribute)) else None
    values = script.assignments.get(key or "", [])
    made = [v for v in values if isinstance(v, ast.IfExp)]  # (its branches are listed too)
    return bool(made) and all(
        _rank_cond(script, v.test) and
        any(isinstance(b, ast.Constant) and b.value is None for b in (v.body, v.orelse))
        for v in made) and all(v in made or parent(v) in made for v in values)


def _rank_test(test: ast.AST) -> bool:
    """The test reads the rank (``rank == 0``, ``is_main_process()``). A periodic test
    (``(epoch + 1) % SAVE_FREQ == 0``) compares with 0 too, but holds on every rank alike: it
    counts only when the operand itself names a rank (``rank % 8 == 0``)."""
    if isinstance(test, ast.BoolOp):
        return any(_rank_test(v) for v in test.values)
    if isinstance(test, ast.Compare) and isinstance(test.left, ast.BinOp) and \
            isinstance(test.left.op, ast.Mod):
        return bool(_GUARD.search(ast.unparse(test.left))) or \
            any(_GUARD.search(ast.unparse(c)) for c in test.comparators
                if not (isinstance(c, ast.Constant) and c.value == 0))
    return bool(_GUARD.search(ast.unparse(test)))


def _rank_cond(script: Script, test: ast.AST) -> bool:
    """The test reads the rank itself or a flag set from it (``if not self.save_to_disk:
    return`` with ``Checkpointer(..., save_to_disk=get_rank() == 0)``)."""
    if isinstance(test, ast.BoolOp):
        return any(_rank_cond(script, v) for v in test.values)
    if _holds_on_every_rank(script, test):
        return False
    return _rank_test(test) or _rank_flag(script, test, 4)


def _holds_on_every_rank(script: Script, test: ast.AST) -> bool:
    """A per-node rank test that the program's own calls make true in every process it starts
    on this host: ``rank % ngpus_per_node == 0`` where every call of the worker passes
    ``ngpus_per_node=1``, or ``gpu == 0`` where every call passes ``gpu=0``, in a worker that
    ``mp.spawn``/``start_processes`` (or ``Process(target=...)``) runs here. Each process then
    counts as its node's first, but all of them share this host's disk. One writer per node
    launched on its own host stays silent (right when each node has a disk of its own), and so
    does an option's default (``--local_rank``, set by the launcher)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            isinstance(test.ops[0], ast.Eq) and isinstance(test.comparators[0], ast.Constant)):
        return False
    left, zero = test.left, test.comparators[0].value
    if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod) and zero == 0:
        vacuous = _bound_by_every_call(script, left.right) == 1  # x % 1 is 0 for every rank
    else:
        vacuous = zero is not None and _bound_by_every_call(script, left) == zero
    func = script.enclosing_function(test)
    return vacuous and func is not None and _spawned_here(script, func, 3)


_SPAWNS = ("multiprocessing.spawn", "multiprocessing.start_processes", "multiprocessing.Process")


def _spawned_here(script: Script, func: ast.AST, depth: int) -> bool:
    """``func`` runs in processes the file starts on this host: it is the target of
    ``mp.spawn(func, nprocs=...)``, ``start_processes`` or ``Process(target=func)``, or is
    called by such a target (``depth`` levels of callers)."""
    name = getattr(func, "name", None)
    for call in script.calls:
        if not (script.call_qualname(call) or "").endswith(_SPAWNS):
            continue
        target = call.args[0] if call.args else kwarg(call, "fn") or kwarg(call, "target")
        if isinstance(target, ast.Name) and target.id == name:
            return True
    return depth > 0 and any(
        (caller := script.enclosing_function(site)) is not None and
        _spawned_here(script, caller, depth - 1) for site in script.call_sites(func))


def _vacuous_guard(script: Script, node: ast.AST) -> str:
    """`` (the test `rank % n == 0` at line 9 holds on every rank: ...)`` for a rank test
    around ``node`` that :func:`_holds_on_every_rank`; empty when there is none."""
    n = node
    while (p := parent(n)) is not None and not isinstance(p, SCOPES):
        if isinstance(p, ast.If):
            tests = [t for b in ast.walk(p.test) if isinstance(b, ast.BoolOp) for t in b.values]
            for t in [p.test, *tests]:
                if _holds_on_every_rank(script, t):
                    return f" (the test `{ast.unparse(t)}` at {script.at(t.lineno)} holds in " \
                           f"every process this file starts on the host: each call binds " \
                           f"its operand to the same constant)"
        n = p
    return ""


def _bound_by_every_call(script: Script, name: ast.expr) -> object:
    """The constant every call of the function around ``name`` passes for that parameter."""
    func = script.enclosing_function(name)
    if not isinstance(name, ast.Name) or func is None or any(
            isinstance(n, ast.Name) and n.id == name.id and isinstance(n.ctx, ast.Store)
            for n in ast.walk(func)):
        return None
    bound = param_env(script, func).get(name.id)
    value = const_eval(bound) if bound is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _rank_flag(script: Script, expr: ast.AST, depth: int) -> bool:
    """``expr`` (a name or attribute, maybe under ``not``) holds a value set from the rank
    only: every value assigned to it (``is_writer = rank == 0``), or bound to the parameter it
    is copied from (``self.save_to_disk = save_to_disk`` in ``__init__``, at every
    instantiation), is a rank test or a flag set from one; a ``None``/``False`` default writes
    on no rank. Any other value (``True``, a config option) leaves it an ordinary switch."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        expr = expr.operand
    key = script.key(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None
    if depth == 0 or key is None:
        return False
    values = list(script.assignments.get(key, []))
    func = script.enclosing_function(expr)
    if isinstance(expr, ast.Name) and func is not None:
        values += script.graph.parameter_values(func, expr.id) or []
    ranked = False
    for v in values:
        if isinstance(v, ast.Constant) and v.value in (None, False):
            continue
        if isinstance(v, ast.Constant) or not (_rank_test(v) or _rank_flag(script, v, depth - 1)):
            return False
        ranked = True
    return ranked
