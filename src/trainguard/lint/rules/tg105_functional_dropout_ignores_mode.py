"""TG105 functional-dropout-ignores-mode: ``F.dropout`` in ``forward`` without ``training=``.

``torch.nn.functional.dropout(input, p=0.5, training=True)`` defaults to ``training=True``
(https://pytorch.org/docs/stable/generated/torch.nn.functional.dropout.html), so it keeps
dropping after ``model.eval()``. Silent under ``if self.training:``, when ``training`` is given by
name, when it is passed by position as anything but the literal ``True``, and when ``p`` is the
literal 0. ``training=True`` by name is a stated choice (a Tacotron 2 pre-net keeps dropout on at
inference, a Monte Carlo model is sampled) unless an instance of the dropping class itself runs
after ``.eval()`` and none of its forwards is a Monte Carlo pass: the code relies on eval mode. The op may sit in a helper the forward calls (a module-level function or
a method, two calls deep), reported at the op; a helper parameter ``training=True`` passed as
the flag and left out by a call is reported at that call (the line that can pass the mode);
``torch.dropout(x, p, True)`` fires on its literal ``train``.
``F.scaled_dot_product_attention(..., dropout_p=self.dropout)`` in a forward has no mode either:
reported at ``dropout_p`` unless it reads ``self.training``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.apifacts import MODE_RULES
from trainguard.lint.astutil import const_value, dotted, is_true, kwarg, parent, walk_local
from trainguard.lint.branches import param_env
from trainguard.lint.callgraph import bind_arguments
from trainguard.lint.consts import const_eval
from trainguard.lint.project import imports_mention
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.modes import mode_before
from trainguard.lint.sampling import sampled_pass
from trainguard.lint.script import Script

CODE = "TG105"
_DROPOUTS = {f"torch.nn.functional.{n}" for n in (
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")}
# torch.dropout(input, p, train): the same op with a required ``train`` flag
_TORCH_DROPOUTS = {f"torch.{n}" for n in (
    "dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")}


_DROPOUT_MODULES = {f"torch.nn.{n}" for n in MODE_RULES[0].classes}


def check(script: Script) -> Iterator[Hit]:
    yield from _shadow_flag(script)
    yield from _foreign_helpers(script)
    yield from _built_in_forward(script)
    for call in script.calls:
        q = script.call_qualname(call)
        if q in _TORCH_DROPOUTS:
            yield from _torch_dropout(script, call, q)
            continue
        if q == "torch.nn.functional.scaled_dot_product_attention":
            yield from _attention_dropout(script, call)
            continue
        if q not in _DROPOUTS:
            continue
        func = script.enclosing_function(call)
        if func is None:
            continue
        training = kwarg(call, "training")
        if training is None and len(call.args) >= 3:
            training = call.args[2]
        if training is not None and not is_true(training) and \
                not _default_true(script, func, training):
            continue  # given: training=self.training, a flag
        stated = training is not None and kwarg(call, "training") is not None and \
            is_true(training)
        p = kwarg(call, "p") or (call.args[1] if len(call.args) >= 2 else None)
        if const_value(p) in (0, 0.0):
            continue
        forward = _forward_running(script, call, func)
        if forward is None:
            continue
        owner = parent(forward).name  # type: ignore[union-attr]
        relied = _eval_forward(script, parent(forward)) if stated else None  # type: ignore
        if stated and relied is None:
            continue  # training=True by name: a stated choice unless eval mode is relied on
        if relied is not None:
            yield Hit(call, f"{q.rsplit('.', 1)[-1]}(...) in {owner}.forward passes "  # type: ignore
                            f"training=True, so dropout stays on after model.eval(): the "
                            f"{owner} evaluated at {script.at(relied.lineno)} in eval mode "
                            f"still drops units and its outputs change from call to call",
                      fix="pass training=self.training, or use an nn.Dropout module",
                      edits=[Edit(training.lineno, training.col_offset,  # type: ignore
                                  training.end_lineno or 0,  # type: ignore
                                  training.end_col_offset or 0, "self.training")]  # type: ignore
                      if forward is func else [], safe=False)
            continue
        via = "" if forward is func else f" (reached from {owner}.forward through {func.name}())"
        name = q.rsplit(".", 1)[-1]  # type: ignore[union-attr]
        if forward is not func:
            sites = _left_at_default(script, func, training) if training is not None else []
            for site, helper, param in sites:
                yield _default_hit(script, site, helper, param, name, call)
            if sites:
                continue
            given = "has no training= argument" if training is None else \
                "gets training=True"
            yield Hit(call, f"{name}(...) {given}{via}, so dropout stays on after "
                            f"model.eval()",
                      fix="pass the module's self.training down to this call as training=, or "
                          "use an nn.Dropout module")
            continue
        if training is not None:
            edit = Edit(training.lineno, training.col_offset, training.end_lineno or 0,
                        training.end_col_offset or 0, "self.training")
        else:
            line = script.lines[(call.end_lineno or 1) - 1]
            end = (call.end_col_offset or 1) - 1
            before = line[:end].rstrip()
            sep = " " if before.endswith(",") else ", "
            edit = Edit(call.end_lineno or 1, end, call.end_lineno or 1, end,
                        f"{sep}training=self.training")
        given = "passes training=True" if training is not None else "has no training= argument"
        yield Hit(call, f"{name}(...) in {owner}.forward {given}, so dropout stays on after "
                        f"model.eval()",
                  fix="pass training=self.training, or use an nn.Dropout module",
                  edits=[edit], safe=False)


def _attention_dropout(script: Script, call: ast.Call) -> Iterator[Hit]:
    """``F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout)`` in a forward: the
    op has no mode and applies dropout whenever ``dropout_p > 0``
    (https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html;
    ``nn.MultiheadAttention`` passes ``dropout_p if self.training else 0.0``). Silent when
    ``dropout_p`` reads ``self.training``, is the literal 0, or the call sits under ``if
    self.training``."""
    p = kwarg(call, "dropout_p") or (call.args[4] if len(call.args) >= 5 else None)
    func = script.enclosing_function(call)
    if p is None or func is None or const_value(p) in (0, 0.0) or \
            _reads_training(p, func) or _guarded_by_training(call, func):
        return
    forward = _forward_running(script, call, func)
    if forward is None:
        return
    owner = parent(forward).name  # type: ignore[union-attr]
    text = script.segment(p) or "p"
    yield Hit(p, f"scaled_dot_product_attention(dropout_p={text}) in {owner}.forward drops "
                 f"attention weights whatever the module's mode: after model.eval() the "
                 f"attention still drops and outputs change from call to call",
              fix=f"pass dropout_p={text} if self.training else 0.0")


def _ignores_mode(script: Script, call: ast.Call, func: ast.AST,
                  origin: Script | None = None) -> bool:
    """A functional dropout call that drops whatever the module's mode: no ``training=`` (or a
    helper parameter left at True), ``p`` not the literal 0, not under ``if self.training``."""
    q = script.call_qualname(call)
    if q in _TORCH_DROPOUTS:
        train = kwarg(call, "train") or (call.args[2] if len(call.args) >= 3 else None)
        if not is_true(train):
            return False
    elif q in _DROPOUTS:
        training = kwarg(call, "training")
        if training is None and len(call.args) >= 3:
            training = call.args[2]
        if training is not None and not _default_true(script, func, training, origin):
            return False
    else:
        return False
    p = kwarg(call, "p") or (call.args[1] if len(call.args) >= 2 else None)
    return const_value(p) not in (0, 0.0) and not _guarded_by_training(call, func)


def _foreign_helpers(script: Script) -> Iterator[Hit]:
    """A forward here calls a helper of another project file whose functional dropout ignores
    the mode: reported at the call in forward (the line that can pass the mode down)."""
    if not script.project_imports or not imports_mention(script, "dropout"):
        return
    for func in script.functions.get("forward", ()):
        if not isinstance(parent(func), ast.ClassDef):
            continue
        for call in walk_local(func):
            if not isinstance(call, ast.Call) or _guarded_by_training(call, func):
                continue
            f = call.func
            head = f.id if isinstance(f, ast.Name) else dotted(f.value) \
                if isinstance(f, ast.Attribute) else None
            if head is None or head.split(".")[0] not in script.project_imports:
                continue
            for t in script.targets(call)[:2]:
                if t.script is script:
                    continue
                drop = next((c for c in walk_local(t.func) if isinstance(c, ast.Call) and
                             _ignores_mode(t.script, c, t.func, script)), None)
                if drop is None:
                    continue
                where = f"{t.script.path.rsplit('/', 1)[-1]}:{drop.lineno}"
                owner = parent(func).name  # type: ignore[union-attr]
                yield Hit(call, f"{t.func.name}() drops with functional dropout that ignores "
                                f"the module's mode ({where}), and {owner}.forward calls it "
                                f"here: dropout stays on after model.eval()",
                          fix=f"give {t.func.name}() a training argument, pass "
                              f"self.training here and on to the dropout call")
                break


def _torch_dropout(script: Script, call: ast.Call, q: str) -> Iterator[Hit]:
    """``torch.dropout(x, p, True)`` in a forward: ``train`` is required and given as the
    literal True, so the op drops in eval mode too."""
    train = kwarg(call, "train") or (call.args[2] if len(call.args) >= 3 else None)
    if not is_true(train):
        return
    func = script.enclosing_function(call)
    forward = _forward_running(script, call, func) if func is not None else None
    if forward is None:
        return
    p = kwarg(call, "p") or (call.args[1] if len(call.args) >= 2 else None)
    if const_value(p) in (0, 0.0):
        return
    assert train is not None
    owner = parent(forward).name  # type: ignore[union-attr]
    yield Hit(call, f"{q}(..., train=True) in {owner}.forward drops in eval mode too: the "
                    f"module's mode never reaches it",
              fix="pass self.training as train, or use an nn.Dropout module",
              edits=[Edit(train.lineno, train.col_offset, train.end_lineno or train.lineno,
                          train.end_col_offset or 0, "self.training")]
              if forward is func else [], safe=False)


def _eval_forward(script: Script, cls: ast.ClassDef) -> ast.Call | None:
    """A forward of an instance of ``cls`` itself (not of a model holding one: a pre-net
    inside a decoder) that runs after ``.eval()``, when no forward of ``cls`` is a Monte Carlo
    pass (the same input run again and again, outputs collected): code that switches the
    model to eval mode and evaluates it relies on dropout being off."""
    found = None
    for c in script.calls:
        f = c.func.value if isinstance(c.func, ast.Attribute) and c.func.attr == "forward" \
            else c.func
        if isinstance(f, ast.Name) and f.id in script.classes or \
                not any(t.node is cls for t in script.graph.types(f)) or _held(script, c, f):
            continue
        if sampled_pass(script, c):
            return None
        if found is None and mode_before(script, c)[0] == "eval":
            found = c
    return found


def _held(script: Script, call: ast.Call, f: ast.AST) -> bool:
    """``self.<sub>(...)`` in a method of a model class: the instance is a submodule run by the
    model holding it (a pre-net in a decoder's ``generate``), not the model put in eval mode."""
    owner = script.enclosing_class(call)
    return owner is not None and owner.name in script.module_classes and \
        isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"


def _default_true(script: Script, func: ast.AST, training: ast.AST,
                  origin: Script | None = None) -> bool:
    """``training`` is a parameter of the helper ``func`` that every call leaves at (or sets
    to) True: ``def drop(x, p, training=True)`` called as ``drop(h, 0.1)``."""
    if not isinstance(training, ast.Name) or func.name == "forward":  # type: ignore[attr-defined]
        return False
    bound = param_env(script, func, origin).get(training.id)  # type: ignore[arg-type]
    return bound is not None and const_eval(bound) is True


def _left_at_default(script: Script, func: ast.AST, flag: ast.AST,
                     depth: int = 3) -> list[tuple[ast.Call, ast.AST, str]]:
    """The calls that leave the helper parameter ``flag`` (a name the dropout call is given as
    its training flag) at its default True: ``(call, helper, parameter)``, following helpers
    that pass a parameter of their own on (``def block(x, train=True): return attend(x,
    train=train)``). A call that sets it (``train=self.training``, or a literal) is not one."""
    if not isinstance(flag, ast.Name) or depth <= 0 or func.name == "forward":  # type: ignore
        return []
    args = func.args  # type: ignore[attr-defined]
    names = [a.arg for a in [*args.posonlyargs, *args.args]]
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip(names[len(names) - len(args.defaults):], args.defaults))
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d)
    if flag.id not in defaults or not is_true(defaults[flag.id]) or any(
            isinstance(n, ast.Name) and n.id == flag.id and isinstance(n.ctx, ast.Store)
            for n in ast.walk(func)):
        return []
    if script.enclosing_class(func) is not None and positional and \
            positional[0].arg in ("self", "cls"):
        names = names[1:]
    found = []
    for site in script.call_sites(func)[:8]:  # type: ignore[arg-type]
        if any(isinstance(a, ast.Starred) for a in site.args) or \
                any(k.arg is None for k in site.keywords):
            continue  # (``*args``/``**kwargs``: what was passed is unknown)
        given = bind_arguments(names, site).get(flag.id)
        caller = script.enclosing_function(site)
        if given is None:
            found.append((site, func, flag.id))
        elif caller is not None:
            found += _left_at_default(script, caller, given, depth - 1)
    return found


def _default_hit(script: Script, site: ast.Call, helper: ast.AST, param: str, name: str,
                 drop: ast.Call) -> Hit:
    """A call of ``helper`` that leaves ``param`` at True, so the dropout call ``drop`` in it
    drops after ``model.eval()``: the line that can pass the module's mode down."""
    caller = script.enclosing_function(site)
    in_forward = caller is not None and caller.name == "forward" and \
        isinstance(parent(caller), ast.ClassDef)
    edits = []
    if in_forward:
        line = script.lines[(site.end_lineno or 1) - 1]
        end = (site.end_col_offset or 1) - 1
        sep = " " if line[:end].rstrip().endswith((",", "(")) else ", "
        sep = "" if line[:end].rstrip().endswith("(") else sep
        edits = [Edit(site.end_lineno or 1, end, site.end_lineno or 1, end,
                      f"{sep}{param}=self.training")]
    return Hit(site, f"{helper.name}() is called without {param}=, so its default "  # type: ignore
                     f"{param}=True reaches {name}(..., training={param}) at "
                     f"{script.at(drop.lineno)}: dropout stays on after model.eval()",
               fix=f"pass {param}=self.training here" if in_forward else
                   f"pass the module's self.training down as {param}=",
               edits=edits, safe=False)


def _built_in_forward(script: Script) -> Iterator[Hit]:
    """``nn.Dropout(p=0.5)(x)`` in ``forward`` (or a helper it runs): a new module on every
    call, in training mode, that the model does not hold, so ``model.eval()`` never reaches it
    (yangze0930/NTS-Net#14). A dropout kept on ``self`` is a submodule and stays silent."""
    for call in script.calls:
        if script.call_qualname(call) not in _DROPOUT_MODULES:
            continue
        stmt = parent(call)
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Attribute) for t in stmt.targets):
            continue  # self.drop = nn.Dropout(p): registered
        p = kwarg(call, "p") or (call.args[0] if call.args else None)
        if p is not None and const_value(p) in (0, 0.0):
            continue
        func = script.enclosing_function(call)
        forward = _forward_running(script, call, func) if func is not None else None
        if forward is None:
            continue
        owner = parent(forward).name  # type: ignore[union-attr]
        name = script.call_qualname(call).rsplit(".", 1)[-1]  # type: ignore[union-attr]
        yield Hit(call, f"nn.{name}(...) is built inside {owner}.forward: a new module on "
                        f"every call, in training mode, that {owner} does not hold, so "
                        f"model.eval() never reaches it and dropout stays on in evaluation",
                  fix=f"build it once in {owner}.__init__ (self.dropout = nn.{name}(...)) and "
                      f"call self.dropout(x) in forward")


def _forward_running(script: Script, call: ast.AST, func: ast.AST) -> ast.AST | None:
    """The ``forward`` of an ``nn.Module`` class that runs ``call`` unguarded: ``func`` itself,
    or a forward that calls ``func`` (a module-level helper or a method of the class, up to two
    calls deep) outside ``if self.training:``. None otherwise."""
    if _guarded_by_training(call, func):
        return None
    if func.name == "forward" and isinstance(parent(func), ast.ClassDef):  # type: ignore[attr-defined]
        return func
    frontier = [func]
    for _ in range(2):
        nxt = []
        for f in frontier:
            for site in script.call_sites(f)[:8]:  # type: ignore[arg-type]
                caller = script.enclosing_function(site)
                if caller is None or _guarded_by_training(site, caller):
                    continue
                if caller.name == "forward" and isinstance(parent(caller), ast.ClassDef):
                    return caller
                nxt.append(caller)
        frontier = nxt
    return None


def _reads_training(expr: ast.expr, func: ast.AST) -> bool:
    """``expr`` follows the module's mode: it reads ``training`` (``p if self.training else
    0.0``), or it is a local name that the function sets from ``training`` or sets under a test
    of it (``dropout_p = self.p if self.training else 0.0``, then ``if not self.training:
    dropout_p = 0.0``, as ``F.multi_head_attention_forward`` does)."""
    if "training" in ast.unparse(expr):
        return True
    if not isinstance(expr, ast.Name):
        return False
    for n in walk_local(func):
        targets = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(t, ast.Name) and t.id == expr.id for t in targets) and (
                n.value is not None and "training" in ast.unparse(n.value) or
                _under_training_test(n, func)):
            return True
    return False


def _under_training_test(node: ast.AST, func: ast.AST) -> bool:
    """Under an ``if`` (either branch) whose test reads ``.training``."""
    return any(isinstance(p, ast.If) for p, _ in _training_tests(node, func))


def _guarded_by_training(call: ast.AST, func: ast.AST) -> bool:
    """``if self.training: x = F.dropout(x, p)`` only runs in train mode."""
    p, n = next(_training_tests(call, func), (None, None))
    return p is not None and (n in getattr(p, "body", []) or n is getattr(p, "body", None))


def _training_tests(node: ast.AST, func: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
    """The ``if`` statements and conditional expressions between ``node`` and ``func`` whose
    test reads ``.training`` and that ``node`` sits in a branch of, innermost first, each with
    its child on the way to ``node``."""
    n = node
    while (p := parent(n)) is not None and p is not func:
        if isinstance(p, (ast.If, ast.IfExp)) and n is not p.test and any(
                isinstance(s, ast.Attribute) and s.attr == "training" for s in ast.walk(p.test)):
            yield p, n
        n = p


_RANDOM = ("torch.rand", "torch.rand_like", "torch.bernoulli", "torch.randn")


def _drops(script: Script, node: ast.AST) -> bool:
    """``node`` runs dropout that takes no mode: a functional dropout op, or a function of the
    file that draws a random mask (``(torch.rand(x.shape) > p).float() * x``)."""
    for c in walk_local(node):
        if not isinstance(c, ast.Call):
            continue
        if script.call_qualname(c) in _DROPOUTS | _TORCH_DROPOUTS:
            func = script.enclosing_function(c)
            if func is not None and _ignores_mode(script, c, func):
                return True
            continue
        if isinstance(c.func, ast.Name) and c.func.id in script.functions and any(
                isinstance(r, ast.Call) and script.call_qualname(r) in _RANDOM and
                "training" not in (script.segment(f) or "")
                for f in script.functions[c.func.id] for r in ast.walk(f)):
            return True
    return False


def _shadow_flag(script: Script) -> Iterator[Hit]:
    """``forward`` drops only under ``if self.is_training:``, a flag of the module's own set in
    ``__init__`` and never changed after: ``model.eval()`` updates ``self.training``, not it, so
    an instance evaluated after ``.eval()`` still drops (d2l's dropout from scratch)."""
    if "eval()" not in script.source:
        return
    for cls in script.nodes:
        if not isinstance(cls, ast.ClassDef):
            continue
        methods = {b.name: b for b in cls.body if isinstance(b, ast.FunctionDef)}
        forward, init = methods.get("forward"), methods.get("__init__")
        if forward is None or init is None or "train" in methods or "eval" in methods:
            continue
        for node in walk_local(forward):
            if not (isinstance(node, ast.If) and isinstance(node.test, (ast.Attribute,
                                                                         ast.Compare))):
                continue
            attrs = [a.attr for a in ast.walk(node.test) if isinstance(a, ast.Attribute)
                     and dotted(a.value) == "self"]
            if len(attrs) != 1 or attrs[0] == "training" or "train" not in attrs[0].lower() \
                    or not _drops(script, ast.Module(body=node.body, type_ignores=[])) \
                    or _set_outside(script, attrs[0], init):
                continue
            relied = _eval_forward(script, cls)
            if relied is None:
                continue
            yield Hit(node.test, f"{cls.name}.forward drops only when self.{attrs[0]} is set, a "
                                 f"flag fixed in __init__ that model.eval() does not change: the "
                                 f"{cls.name} evaluated at {script.at(relied.lineno)} in eval "
                                 f"mode still drops units",
                      fix="test self.training instead (nn.Module.train()/eval() set it)")


def _set_outside(script: Script, attr: str, init: ast.AST) -> bool:
    """``attr`` is stored anywhere but in ``__init__`` (``net.is_training = False``)."""
    inside = {id(n) for n in ast.walk(init)}
    return any(isinstance(n, ast.Attribute) and n.attr == attr and
               isinstance(n.ctx, ast.Store) and id(n) not in inside for n in ast.walk(script.tree))
