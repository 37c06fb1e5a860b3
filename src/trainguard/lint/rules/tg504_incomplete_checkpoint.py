"""TG504 incomplete-checkpoint: a resume checkpoint without the optimizer (or scheduler/scaler).

A checkpoint that records the epoch or step is meant for resuming; without the optimizer's
state (momentum, Adam moments), the scheduler's position and the GradScaler's scale, the
resumed run is not the one that stopped
(https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html).
A bare ``state_dict`` exported for inference has no epoch/step and stays silent; so do dicts
built with ``**`` or by helpers the file cannot see (a method of the file whose one ``return`` is
a dict display is read: :func:`_returned_dict`), and files whose only optimizer is plain SGD
without momentum (it has no state). A missing scheduler is named in the message when the
optimizer is missing too, and alone fires only when the file resumes (it loads an optimizer's
state back: the scheduler then restarts at its first step, alibaba/TorchEasyRec#664); a missing ``GradScaler`` whose ``step`` drives
the optimizer fires alone (the resumed run restarts the loss scale: huggingface/transformers#11323).
The run's position is a key named like one or a counter the program advances; a save function
that every call hands the optimizer and that never reads it is meant for resuming too. A call of a
project helper that saves the optimizer only when given one (``optimizer=None``) and is not
given it is reported at the call, and so is one that hands a helper saving an entry per keyword
argument (``**objects``) no optimizer. A resume that reads the weights and the position back from a
checkpoint that holds the optimizer's state, never loads that entry and trains on, is reported
at its last read of the checkpoint (:mod:`trainguard.lint.restores`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trainguard.lint.astutil import const_value, dotted, kwarg, parent, walk_local
from trainguard.lint.callgraph import bind_arguments, parameter_default, returned_values
from trainguard.lint.dataflow import last_assignment, scope_of
from trainguard.lint.consts import resolve, with_constants
from trainguard.lint.file_origins import origins
from trainguard.lint.options import argparse_default
from trainguard.lint.restores import restores
from trainguard.lint.rules import Hit
from trainguard.lint.script import Script

CODE = "TG504"
_SAVE_HELPER = re.compile(r"save|checkpoint|ckpt", re.I)
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_PROGRESS = re.compile(r"epoch|step|iter", re.I)
_OPTIM = re.compile(r"optim|opt\b|opt_|_opt", re.I)
_OPT_SHORT = re.compile(r"\bopt[A-Z0-9]")  # optG, optD, opt1 (case-sensitive: not "options")
_SCHED = re.compile(r"sched|lr_", re.I)
_SCALER = re.compile(r"scaler|amp", re.I)


def check(script: Script) -> Iterator[Hit]:
    yield from _weights_resumed(script)
    yield from _saved_not_restored(script)
    for save in script.calls:
        if script.call_qualname(save) == "torch.save" and save.args:
            for call, entries, last in _saved(script, save):
                yield from _judge(script, call, entries, last)
            continue
        name = (dotted(save.func) or "").rsplit(".", 1)[-1]
        if _SAVE_HELPER.search(dotted(save.func) or ""):
            found = _optimizer_left_to_default(script, save)
            for hit in _judge(script, save, found, save) if found is not None else ():
                yield Hit(save, f"{name}() is called without its optimizer argument, so "
                                f"{hit.message.replace('this checkpoint', 'the checkpoint')}",
                          fix="pass the optimizer (and scheduler) to this call")
        if save.keywords:  # a helper saving one entry per keyword argument
            found = _keyword_entries(script, save)
            for hit in _judge(script, save, found, save) if found is not None else ():
                yield Hit(save, f"{name}() saves one entry per keyword argument, so the "
                                f"checkpoint holds what this call passes: "
                                f"{hit.message.replace('this checkpoint', 'it')}",
                          fix="pass the missing state to this call by keyword")


def _weights_resumed(script: Script) -> Iterator[Hit]:
    """``torch.save(model.state_dict(), f"{epoch:05d}.pth")`` in a training loop, the step kept
    only in the file's name, and a ``load_state_dict(torch.load(...))`` in the same file that
    training then goes on from: that file was a resume checkpoint without the optimizer
    (SamsungSAILMontreal/TinyRecursiveModels#56; k2-fsa/snowfall#110). A load after which nothing
    trains (evaluating the best epoch's weights) keeps the save an export."""
    if "load_state_dict" not in script.source or not script.may_reach("backward"):
        return
    saves = [c for c in script.calls if script.call_qualname(c) == "torch.save" and
             len(c.args) >= 2 and isinstance(c.args[0], ast.Call) and
             isinstance(c.args[0].func, ast.Attribute) and c.args[0].func.attr == "state_dict"
             and _numbered_path(c.args[1], c) and _in_training_loop(script, c)]
    if not saves or not _stateful_optimizer(script):
        return
    for load in script.calls:
        if not (isinstance(load.func, ast.Attribute) and load.func.attr == "load_state_dict"
                and load.args and _loaded_file(script, load.args[0], load)):
            continue
        func = script.enclosing_function(load)
        if _trains_after(script, load) or func is not None and any(
                _trains_after(script, site) for site in script.call_sites(func)[:6]):
            for save in saves:
                yield Hit(save, "this saves the model's state_dict alone, the "
                                f"{_progress_name(save)} kept only in the file name, and the "
                                f"file is loaded back at {script.at(load.lineno)} and trained "
                                "on: a resume checkpoint without the optimizer's state, so the "
                                "resumed run restarts its momentum/moment estimates (and the "
                                "schedule) from zero",
                          fix="save a dict with 'model', 'optimizer' (and scheduler) state_dict()s "
                              "and the epoch, and load them all when resuming")
            return


def _saved_not_restored(script: Script) -> Iterator[Hit]:
    """A resume that reads back the weights and the run's position from a checkpoint whose
    ``torch.save`` wrote the optimizer's state too, but never loads that entry, and after which
    training goes on: the checkpoint is complete, the restore is not, and the resumed run
    restarts its momentum/moment estimates (ferdous-alam/GenCAD#23: "the optimizer's and
    scheduler's state_dict is saved but not loaded"). Silent when the file loads any
    optimizer's state, when the checkpoint is read in a way the lint cannot follow, when its
    keys are not all among the save's, or when its path is not the save's (the same binding:
    :mod:`trainguard.lint.file_origins`)."""
    if "torch.load" not in script.source or _resumes_optimizer(script) or \
            not _stateful_optimizer(script) or not script.may_reach("backward"):
        return
    saves = [(c, _entries(script, c, c.args[0])) for c in script.calls
             if script.call_qualname(c) == "torch.save" and len(c.args) >= 2]
    for found in restores(script):
        read = origins(script, found.load.args[0], 4) if found.load.args else set()
        for save, entries in saves:
            if not read & origins(script, save.args[1], 3):
                continue  # another file (a download read with the same keys)
            keys = {k for k, _ in entries or ()}
            optim = [k for k, v in entries or () if _OPTIM.search(k) or _OPT_SHORT.search(k)
                     or _OPTIM.search(v.split(".state_dict")[0].rsplit(".", 1)[-1])]
            if not optim or not found.keys <= keys or optim[0] in found.keys or \
                    not found.loaded or not any(_PROGRESS.search(k) for k in found.assigned):
                continue
            if not _resumed_after(script, found.load):
                break
            yield Hit(found.last or found.load,
                      f"this resume reads back {_listed(sorted(found.keys))} from the checkpoint "
                      f"that torch.save at {script.at(save.lineno)} writes, but never loads its "
                      f"'{optim[0]}' entry: the resumed run trains on with a fresh optimizer, "
                      f"its momentum/moment estimates restarted from zero",
                      fix=f"load it too: optimizer.load_state_dict({found.name}['{optim[0]}'])")
            break


def _listed(keys: list[str]) -> str:
    quoted = [f"'{k}'" for k in keys]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _resumed_after(script: Script, load: ast.Call) -> bool:
    """Training runs after ``load``, in its function or after a call of that function."""
    func = script.enclosing_function(load)
    return _trains_after(script, load) or func is not None and any(
        _trains_after(script, site) for site in script.call_sites(func)[:6])


def _progress_name(save: ast.Call) -> str:
    found = _PROGRESS.search(" ".join(_path_words(save.args[1], save)))
    return found.group(0).lower() if found else "step"


def _path_expression(path: ast.AST, at: ast.AST) -> ast.AST | None:
    """``path``, or for a name the value last assigned to it before ``at``."""
    return last_assignment(path.id, at) if isinstance(path, ast.Name) else path


def _path_words(path: ast.AST, at: ast.AST) -> list[str]:
    """The names, keys and text of a file path expression: ``f"{epoch:05d}.pth"``,
    ``os.path.join(d, f"step_{state['step']}")``."""
    expr = _path_expression(path, at)
    return [n.id if isinstance(n, ast.Name) else str(n.value) for n in ast.walk(expr)
            if isinstance(n, ast.Name) or isinstance(n, ast.Constant)
            and isinstance(n.value, str)] if expr is not None else []


def _numbered_path(path: ast.AST, at: ast.AST) -> bool:
    """A path built with a value formatted in (an f-string, ``%``, ``format``, ``join``) that names
    the run's position: a progress variable or key, or text such as ``step_``."""
    expr = _path_expression(path, at)
    return expr is not None and any(_PROGRESS.search(w) for w in _path_words(path, at)) and \
        any(isinstance(n, (ast.FormattedValue, ast.BinOp, ast.Call)) for n in ast.walk(expr))


def _in_training_loop(script: Script, call: ast.AST) -> bool:
    """In a loop that reaches a backward, or in a function called from one (a save helper)."""
    if any(script.has_backward(loop) for loop in script.enclosing_loops(call)):
        return True
    func = script.enclosing_function(call)
    return func is not None and any(
        any(script.has_backward(loop) for loop in script.enclosing_loops(site))
        for site in script.call_sites(func)[:6])


def _loaded_file(script: Script, arg: ast.AST, at: ast.AST) -> bool:
    """``torch.load(...)`` given directly, or through a name last assigned from one."""
    if isinstance(arg, ast.Call):
        return script.call_qualname(arg) == "torch.load"
    if isinstance(arg, ast.Name):
        value = last_assignment(arg.id, at)
        return isinstance(value, ast.Call) and script.call_qualname(value) == "torch.load"
    return False


def _trains_after(script: Script, load: ast.Call) -> bool:
    """A statement after ``load`` in its function (or the module) that reaches a backward."""
    scope = script.enclosing_function(load) or script.tree
    stmts = [s for s in walk_local(scope) if isinstance(s, ast.stmt)
             and s.lineno > (load.end_lineno or load.lineno) and parent(s) is not None]
    return any(script.has_backward(s) for s in stmts if isinstance(s, (ast.Expr, ast.Assign,
                                                                          ast.For, ast.While)))


def _optimizer_left_to_default(script: Script, call: ast.Call) -> list[tuple[str, str]] | None:
    """The entries a project helper saves when ``call`` leaves its optimizer parameter to its
    default ``None`` (``def save_checkpoint(path, model, epoch, optimizer=None)`` adding
    ``state["optimizer"]`` only when given one; ktonal/mimikit#30), without the entries that
    read that parameter; None when the call passes it or the helper is not so."""
    targets = [t for t in script.targets(call) if not t.instance]
    if len(targets) != 1:
        return None
    func, other = targets[0].func, targets[0].script
    args = func.args  # type: ignore[attr-defined]
    positional = [*args.posonlyargs, *args.args]
    optional = {a.arg for a in [*positional, *args.kwonlyargs] if "optim" in a.arg and
                isinstance(d := parameter_default(func, a), ast.Constant) and d.value is None}
    names = [a.arg for a in positional]
    if targets[0].bound and names[:1] in (["self"], ["cls"]):
        names = names[1:]
    if not optional or optional & set(bind_arguments(names, call)):
        return None
    for save in walk_local(func):
        if isinstance(save, ast.Call) and other.call_qualname(save) == "torch.save" and save.args:
            entries = _entries(other, save, save.args[0])
            if entries and any(o in v for o in optional for _, v in entries):
                return [(k, v) for k, v in entries if not any(o in v for o in optional)]
    return None


def _keyword_entries(script: Script, call: ast.Call) -> list[tuple[str, str]] | None:
    """The entries a project helper saves for ``call`` when its checkpoint holds one entry per
    keyword argument (``def save_checkpoint(path, step, **objects)`` saving ``{"step": step,
    **{k: v.state_dict() for k, v in objects.items()}}``): the dict's own entries and one per
    keyword ``call`` passes beyond the named parameters. None when the helper is not so, or the
    call spreads a mapping of its own (``**states``), whose keys cannot be read."""
    targets = [t for t in script.targets(call) if not t.instance]
    if len(targets) != 1 or any(kw.arg is None for kw in call.keywords):
        return None
    func, other = targets[0].func, targets[0].script
    args = func.args  # type: ignore[attr-defined]
    if args.kwarg is None:
        return None
    named = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    for save in walk_local(func):
        if not (isinstance(save, ast.Call) and other.call_qualname(save) == "torch.save"
                and save.args):
            continue
        obj = save.args[0]
        shown = last_assignment(obj.id, save) if isinstance(obj, ast.Name) else obj
        if not isinstance(shown, ast.Dict):
            continue
        spread = [_spread_value(v, args.kwarg.arg) for k, v in zip(shown.keys, shown.values)
                  if k is None]
        own = [(k, v) for k, v in zip(shown.keys, shown.values) if k is not None]
        if len(spread) != 1 or spread[0] is None or \
                not all(isinstance(k, ast.Constant) for k, _ in own):
            continue
        return [(str(k.value), ast.unparse(v)) for k, v in own] + \
            [(kw.arg, spread[0].format(ast.unparse(kw.value))) for kw in call.keywords
             if kw.arg is not None and kw.arg not in named]
    return None


def _spread_value(value: ast.AST, rest: str) -> str | None:
    """When ``value``, spread with ``**`` into a saved dict, holds one entry per item of the
    ``**rest`` parameter: the source of each entry's value, ``{}`` standing for the item
    (``{}`` for ``**rest``, ``{}.state_dict()`` for ``**{k: v.state_dict() for k, v in
    rest.items()}``); else None."""
    if isinstance(value, ast.Name):
        return "{}" if value.id == rest else None
    if not (isinstance(value, ast.DictComp) and len(value.generators) == 1):
        return None
    gen = value.generators[0]
    it, target = gen.iter, gen.target
    if gen.ifs or not (isinstance(target, ast.Tuple) and len(target.elts) == 2 and
                       all(isinstance(e, ast.Name) for e in target.elts)):
        return None
    key, item = target.elts[0].id, target.elts[1].id  # type: ignore[attr-defined]
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and
            it.func.attr == "items" and not it.args and dotted(it.func.value) == rest and
            dotted(value.key) == key):
        return None
    text = ast.unparse(value.value).replace("{", "{{").replace("}", "}}")
    return re.sub(rf"\b{re.escape(item)}\b", "{}", text)


def _saved(script: Script, call: ast.Call
           ) -> Iterator[tuple[ast.Call, list[tuple[str, str]], ast.AST]]:
    """(call, the saved dict's entries, its last entry) for ``torch.save(obj, ...)``; when
    ``obj`` is a parameter of a save helper (``def save_checkpoint(self, state, is_best)``),
    once per call of the helper that hands it a dict display."""
    entries = _entries(script, call, call.args[0])
    if entries is not None:
        yield call, entries, _last_entry(script, call)
        return
    obj, func = call.args[0], script.enclosing_function(call)
    if not isinstance(obj, ast.Name) or func is None or \
            obj.id not in [a.arg for a in func.args.args] or \
            any(isinstance(n, ast.Name) and n.id == obj.id and isinstance(n.ctx, ast.Store)
                for n in walk_local(func)):
        return
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    for site in script.call_sites(func)[:8]:
        bound = bind_arguments(params[1:] if params[:1] == ["self"] else params, site)
        arg = bound.get(obj.id)
        found = _dict_entries(script, arg) if arg is not None else None
        if found is not None and isinstance(arg, ast.Dict) and arg.keys:
            yield site, found, arg.keys[-1]


def _judge(script: Script, call: ast.Call, entries: list[tuple[str, str]],
           last: ast.AST) -> Iterator[Hit]:
    keys = " ".join(k for k, _ in entries)
    values = " ".join(v for _, v in entries)
    progress = _progress(script, entries, call)
    if progress is None:
        progress = _unused_optimizer(script, call)
        if progress is None:
            return
    has = lambda rx: bool(rx.search(keys)) or any(  # noqa: E731
        rx.search(v) for v in values.split())
    if has(_OPTIM) or has(_OPT_SHORT) or _optimizer_attribute_saved(script, entries):
        if script.scalers and not has(_SCALER) and _scaler_steps(script):
            yield Hit(call, f"this checkpoint saves the {progress} and the optimizer but "
                            f"not the GradScaler state: a resumed run restarts the loss "
                            f"scale and skips steps until it has found it again",
                      fix="add scaler.state_dict() to the checkpoint and load it on resume")
        elif script.schedulers and not has(_SCHED) and _resumes_optimizer(script):
            yield Hit(last, f"this checkpoint saves the {progress} and the optimizer but not "
                            f"the scheduler, and this file resumes from it (the optimizer's "
                            f"load_state_dict): the resumed run's scheduler starts again at its "
                            f"first step, so the learning rate jumps back",
                      fix="add scheduler.state_dict() to the checkpoint and call "
                          "scheduler.load_state_dict(...) where the optimizer's state is loaded")
        return
    if not _stateful_optimizer(script) or _untrained_weights(script, call) or \
            _beside_complete(script, call):
        return
    missing = ["optimizer"]
    if script.schedulers and not has(_SCHED):
        missing.append("scheduler")
    if script.scalers and not has(_SCALER):
        missing.append("GradScaler")
    yield Hit(last, f"this checkpoint saves the {progress} but not the "
                    f"{', '.join(missing)} state: resuming from it restarts "
                    f"momentum and adaptive moments",
              fix=f"add the {' and '.join(m + '.state_dict()' for m in missing)} to the "
                  f"checkpoint")


def _beside_complete(script: Script, save: ast.Call) -> bool:
    """Another ``torch.save`` in the same loop body (or, outside loops, the same function) writes
    the optimizer's state: the run keeps a complete resume checkpoint (``last.pt``) and this
    lighter one (``best.pt``: epoch, metric and weights) is an export of its best weights for
    inference, as PyTorch's "Saving and Loading Models" tutorial tells the two apart
    (https://pytorch.org/tutorials/beginner/saving_loading_models.html)."""
    loops = script.enclosing_loops(save)
    scope = loops[0] if loops else script.enclosing_function(save) or script.tree
    for other in walk_local(scope):
        if other is save or not isinstance(other, ast.Call) or not other.args or \
                script.call_qualname(other) != "torch.save":
            continue
        entries = _entries(script, other, other.args[0]) or []
        text = " ".join(f"{k} {v}" for k, v in entries)
        if _OPTIM.search(text) or _OPT_SHORT.search(text) or \
                _optimizer_attribute_saved(script, entries):
            return True
    return False


def _unused_optimizer(script: Script, save: ast.Call) -> str | None:
    """The save sits in a function that every call hands an optimizer (by name or build) and
    that never reads that parameter (``def save_checkpoint(path, model, optimizer, epoch)``
    saving only the model): a checkpoint meant for resuming that leaves the optimizer out."""
    func = script.enclosing_function(save)
    if func is None or not script.call_sites(func):
        return None
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    read = {n.id for n in walk_local(func) if isinstance(n, ast.Name)}
    for name in params:
        if name in read or name == "self":
            continue
        args = [bind_arguments(params[1:] if params[:1] == ["self"] else params, site).get(name)
                for site in script.call_sites(func)[:8]]
        if args and all(a is not None and (script.is_optimizer(script.key(a)) or
                                           _OPTIM.search(dotted(a) or "")) for a in args):
            return (f"model state ({func.name}() is handed the optimizer as `{name}` and "
                    f"never saves it)")
    return None


def _optimizer_attribute_saved(script: Script, entries: list[tuple[str, str]]) -> bool:
    """A value reads the state of an attribute the file binds to an optimizer it builds
    (``model.g_optimizer.state_dict()`` for ``self.g_optimizer = torch.optim.Adam(...)`` in the
    model's ``__init__``), whatever its name."""
    built = [c for c in script.calls if _optimizer_class(script.call_qualname(c) or "")]
    attrs = {t.attr for c in built if isinstance(parent(c), ast.Assign)
             for t in parent(c).targets if isinstance(t, ast.Attribute)}  # type: ignore
    return any(re.search(rf"\.{re.escape(a)}\.state_dict\(", v) for a in attrs for _, v in entries)


def _resumes_optimizer(script: Script) -> bool:
    """The file restores an optimizer's state (``optimizer.load_state_dict(state["optim"])``):
    it resumes from its checkpoints, so what they leave out restarts."""
    return any(isinstance(c.func, ast.Attribute) and c.func.attr == "load_state_dict" and
               script.is_optimizer(script.key(c.func.value)) for c in script.calls)


def _progress(script: Script, entries: list[tuple[str, str]], at: ast.AST) -> str | None:
    """What the checkpoint records of the run's position: a key named like one (``epoch``,
    ``global_step``, ``iter_num``) unless its value is a command-line option, or a counter the
    program advances (``episodes_done`` that a loop sets to ``ep + 1`` or ``+= 1``s, or that
    starts a ``range`` on resume)."""
    for key, value in entries:
        m = _PROGRESS.search(key) if not key.startswith("[") else None
        if m and not _configured(script, value, at):
            return m.group(0).lower()
    counters = _counters(script)
    for key, value in entries:
        if value.rsplit(".", 1)[-1] in counters:
            return f"counter `{key}`"
    return None


def _configured(script: Script, value: str, at: ast.AST) -> bool:
    """``value`` reads a command-line option (``"epochs": args.epochs``, the number of epochs
    asked for): a setting recorded with the weights, not the run's position."""
    m = re.fullmatch(r"(\w+)\.(\w+)", value)
    return m is not None and argparse_default(at, m.group(1), m.group(2), script) is not None


def _counters(script: Script) -> set[str]:
    """Names (last attribute) the program advances by one or resumes a loop from."""
    memo = script.__dict__.get("_tg_counters")
    if memo is not None:
        return memo
    out: set[str] = set()
    for node in script.nodes:
        target = None
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and \
                const_value(node.value) == 1:
            target = node.target
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Add) and \
                const_value(node.value.right) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "range" and len(node.args) >= 2:
            target = node.args[0]
        if isinstance(target, ast.Name):
            out.add(target.id)
        elif isinstance(target, ast.Attribute):
            out.add(target.attr)
    script.__dict__["_tg_counters"] = out
    return out


def _scaler_steps(script: Script) -> bool:
    """A GradScaler steps an optimizer (``scaler.step(optimizer)``): its scale is live state."""
    return any(isinstance(c.func, ast.Attribute) and c.func.attr == "step" and
               script.key(c.func.value) in script.scalers for c in script.calls)


def _stateful_optimizer(script: Script) -> bool:
    """An optimizer with state to lose: anything but plain SGD without momentum. Read from the
    values bound to the optimizer names, and from every optimizer the file constructs (one
    built in a factory, ``model, opt = build()``, is bound to no constructor call)."""
    built = [c for c in script.calls if _optimizer_class(script.call_qualname(c) or "")]
    for key in script.optimizers:
        built += list(script.assignments.get(key, []))
    for value in built:
        q = script.call_qualname(value) or ""
        if not q.endswith("SGD"):
            return True
        momentum = kwarg(value, "momentum")  # type: ignore[arg-type]
        if momentum is not None and const_value(momentum) not in (0, 0.0):
            return True
    return False


def _optimizer_class(qualname: str) -> bool:
    """``torch.optim.AdamW``, ``torch.optim.sgd.SGD``: a torch optimizer's constructor."""
    parts = qualname.split(".")
    return len(parts) >= 3 and parts[:2] == ["torch", "optim"] and "lr_scheduler" not in parts \
        and parts[-1][:1].isupper() and parts[-1] != "Optimizer"


def _last_entry(script: Script, call: ast.Call) -> ast.AST:
    """Where the missing state belongs: the last entry of the dict display saved by ``call``
    (given to it, or last assigned before it to the name given); else ``call`` itself."""
    obj = call.args[0]
    if isinstance(obj, ast.Name):
        found = None
        for sub in walk_local(scope_of(call)):
            if (isinstance(sub, ast.Assign) and sub.lineno <= call.lineno
                    and any(isinstance(t, ast.Name) and t.id == obj.id for t in sub.targets)
                    and (found is None or sub.lineno >= found.lineno)):
                found = sub
        obj = found.value if found is not None else obj
    obj = _returned_dict(script, obj) or obj
    if isinstance(obj, ast.Dict) and obj.keys and obj.keys[-1] is not None:
        return obj.keys[-1]
    if isinstance(obj, ast.DictComp):  # the keys it iterates: where the missing ones belong
        return obj.generators[0].iter
    if isinstance(obj, ast.Call) and obj.keywords and obj.func is not None and \
            ast.unparse(obj.func) == "dict":
        return obj.keywords[-1]
    return call


def _entries(script: Script, call: ast.Call, obj: ast.AST) -> list[tuple[str, str]] | None:
    """(key, value source) pairs of the saved dict, or None when it cannot be read."""
    if isinstance(obj, ast.Name):
        scope = scope_of(call)
        found: list[tuple[str, str]] | None = None
        for sub in sorted(walk_local(scope), key=lambda n: (getattr(n, "lineno", 0),
                                                            getattr(n, "col_offset", 0))):
            if getattr(sub, "lineno", 10**9) > call.lineno:
                continue
            if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == obj.id
                                                   for t in sub.targets):
                found = _dict_entries(script, sub.value)
            elif isinstance(sub, ast.Assign) and found is not None:
                for t in sub.targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and \
                            t.value.id == obj.id:
                        found.append((_key_text(t.slice, sub), ast.unparse(sub.value)))
        return found
    return _dict_entries(script, obj)


def _key_text(key: ast.AST, assign: ast.Assign) -> str:
    """A saved entry's key: the constant, or for a key computed in a loop (``state[name] =
    getattr(self, name).state_dict()`` for ``name in self.optimizer_names``) its source and
    the collections the loops around it iterate, which say what the entries hold; in brackets,
    so that it is never read as the run's position."""
    if isinstance(key, ast.Constant):
        return str(key.value)
    names = {n.id for n in ast.walk(assign) if isinstance(n, ast.Name)}
    loops = [loop.iter for loop in Script.enclosing_loops(assign)
             if isinstance(loop, (ast.For, ast.AsyncFor)) and
             names & {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}]
    return "[" + " ".join(ast.unparse(n) for n in [key, *loops]) + "]"


def _dict_entries(script: Script, node: ast.AST) -> list[tuple[str, str]] | None:
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return None
        out = []
        for k, v in zip(node.keys, node.values):
            if not isinstance(k, ast.Constant):
                return None
            out.append((str(k.value), ast.unparse(v)))
        return out
    if isinstance(node, ast.DictComp):
        return _comprehension_entries(script, node)
    if isinstance(node, ast.Call) and (ast.unparse(node.func) == "dict") and not node.args:
        return [(kw.arg, ast.unparse(kw.value)) for kw in node.keywords if kw.arg] \
            if all(kw.arg for kw in node.keywords) else None
    returned = _returned_dict(script, node)
    return _dict_entries(script, returned) if returned is not None else None


def _returned_dict(script: Script, node: ast.AST) -> ast.Dict | None:
    """The dict display that ``node``, a call of one function or method of this file, returns
    (``torch.save(state.state_dict(), path)`` with a train-state class whose ``state_dict()``
    returns ``{"model": ..., "optimizer": ..., "step": ...}``): what is saved is that dict.
    None when the call may run several functions or one with any other ``return``."""
    if not isinstance(node, ast.Call):
        return None
    targets = script.targets(node)
    if len(targets) != 1 or targets[0].script is not script or targets[0].instance:
        return None
    values = returned_values(targets[0].func)
    return values[0] if len(values) == 1 and isinstance(values[0], ast.Dict) else None


def _comprehension_entries(script: Script, node: ast.DictComp) -> list[tuple[str, str]] | None:
    """``{k: objs[k].state_dict() for k in self.ckpt_keys}`` over keys the program fixes (a
    literal tuple, or a name or class attribute bound to one): one entry per key, the value
    read with the key put in (``objs['model'].state_dict()``)."""
    gen = node.generators[0] if len(node.generators) == 1 else None
    if gen is None or gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name):
        return None
    keys = resolve(script, gen.iter)
    if not isinstance(keys, (tuple, list)) or not all(isinstance(k, str) for k in keys):
        return None
    name = gen.target.id
    out = []
    for key in keys:
        k = with_constants(node.key, {name: key})
        v = with_constants(node.value, {name: key})
        out.append((str(const_value(k)) if isinstance(k, ast.Constant) else ast.unparse(k),
                    ast.unparse(v)))
    return out


def _untrained_weights(script: Script, save: ast.Call) -> bool:
    """The saved ``state_dict()``s are all of models built in the save's own function, which
    trains nothing (``donor = Net()`` saved as a published file): freshly initialised weights,
    no run whose optimizer state could be missing."""
    func = script.enclosing_function(save)
    if func is None or not save.args or script.has_backward(func):
        return False
    obj = save.args[0]
    exprs = [obj, last_assignment(obj.id, save)] if isinstance(obj, ast.Name) else [obj]
    for n in [n for e in exprs if e is not None for n in ast.walk(e)]:
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n is not obj:
            exprs.append(last_assignment(n.id, n))  # "model": state, state = {...}
    owners = [c.func.value for e in exprs if e is not None for c in ast.walk(e)
              if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and
              c.func.attr == "state_dict"]
    return bool(owners) and all(
        isinstance(o, ast.Name) and isinstance(v := last_assignment(o.id, o), ast.Call) and
        script.graph.class_named(dotted(v.func)) is not None for o in owners)
