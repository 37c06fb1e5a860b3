"""The call that hands a meter the tensor it stores, through objects that pass their argument on.

When a method stores what it is given (``self.total += value * n`` in ``update(self, value,
n)``), keeping a graph is not its choice but its caller's: the call that hands it a tensor with
its ``grad_fn`` is where ``.item()`` or ``.detach()`` belongs (``growth.storing_call`` finds it in
the frame that holds the meter). Meters are often kept by another object whose own method only
passes its argument on (a logger of windowed values: ``for k, v in values.items():
self.meters[k].update(v)``; a trainer's ``_update_stats(losses)`` feeding ``self.stats``), and the
frame may hand the object to a function of its own (``log_losses(meter, losses, n)``): the call
named is then the one, in the frame or in that function, that hands the outermost such object
its tensors. A method that makes the kept value itself, or picks an entry of what it is given
(``state["loss"]``), keeps its own line, and so does a meter fed by a callback's hook
(``on_batch_end(self, loss)``: a training loop hands its hooks the loss, the hook chooses what
to keep).

Source only: the objects of the holder's path are read by ``frames.read_path`` (no user code
runs), one parse per file (``bounds.parse_file``), at most :data:`_LEVELS` objects up the path and
the first 64 methods of 8 classes of each object's MRO.
"""

from __future__ import annotations

import ast
from types import CodeType, FrameType

from trainguard.sanitize.core.frames import Location, is_user_code, read_path
from trainguard.sanitize.core.growth import (argument_storing_method, bare_names, frame_call,
                                             storing_call)
from trainguard.sanitize.core.holders import Holder
from trainguard.sanitize.core.source import function_node

__all__ = ["handing_call"]

_LEVELS = 4  # objects up the holder's path that may pass their argument on
_CLASSES = 8  # classes of an object's MRO looked at
_METHODS = 64  # methods of one class looked at


def handing_call(holder: Holder, grown: Location) -> Location | None:
    """The call that hands the tensors stored by statement ``grown`` (in a method that stores its
    own argument) to the outermost object of ``holder``'s path that only passes them on: in the
    holder's frame, or in a function of the user's code the frame passes that object to; None
    when the method makes or picks what it keeps, or no such call is found."""
    found = storing_call(holder, grown)
    method = argument_storing_method(holder, grown) if found is None else None
    if method is None:
        return found
    frame, owner, name = holder.frame, holder.path.rsplit(".", 1)[0], method.name
    for _ in range(_LEVELS):
        found = frame_call(frame.f_code, owner, name) or _passed_call(frame, owner, name)
        if found is not None:
            return found
        up = _passing_method(frame, owner, name)
        if up is None or up[1].startswith("on_"):
            return None  # (a callback's hook, ``on_batch_end(loss)``, chooses what it keeps)
        owner, name = up
    return None


def _plain(node: ast.AST) -> str:
    """The dotted attributes of a receiver, without its keys and look-ups: ``self.meters`` for
    ``self.meters[k]`` or ``self.meters.setdefault(k, Meter())``."""
    while isinstance(node, ast.Subscript) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("setdefault", "get")):
        node = node.value if isinstance(node, ast.Subscript) else node.func.value
    if isinstance(node, ast.Attribute):
        return f"{_plain(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else "?"


def _passing_method(frame: FrameType, owner: str, name: str) -> tuple[str, str] | None:
    """``(prefix, method)``: the nearest object up ``owner``'s path whose class has a method
    calling ``self.<rest of the path>.<name>(...)`` with one of its own arguments, and that
    method's name; None when there is none."""
    try:
        node: ast.AST = ast.parse(owner, mode="eval").body
    except SyntaxError:
        return None
    target = _plain(node)
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
        obj = read_path(frame, node) if isinstance(node, (ast.Attribute, ast.Name)) else None
        if obj is None or not isinstance(getattr(obj, "__dict__", None), dict):
            continue
        rest = "self" + target[len(_plain(node)):]
        for cls in type(obj).__mro__[:_CLASSES]:
            for func in list(vars(cls).values())[:_METHODS]:
                code = getattr(func, "__code__", None)
                if isinstance(code, CodeType) and code.co_argcount and is_user_code(code) \
                        and _passes_argument(code, rest, name):
                    return ast.unparse(node), code.co_name
    return None


def _passes_argument(code: CodeType, receiver: str, name: str) -> bool:
    """Whether method ``code`` calls ``<receiver>.<name>(...)`` (``self`` being its first
    argument) with one of its own arguments, an entry of one, or a loop variable over one, as
    is: ``self.meters[k].update(v, n)`` in ``for k, v in values.items()``."""
    func = function_node(code)
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    receiver = code.co_varnames[0] + receiver[len("self"):]
    args = func.args
    carried = {a.arg for a in [*args.args[1:], *args.kwonlyargs, args.vararg, args.kwarg] if a}
    for loop in (n for n in ast.walk(func) if isinstance(n, (ast.For, ast.comprehension))):
        if any(isinstance(x, ast.Name) and x.id in carried for x in ast.walk(loop.iter)):
            carried |= {x.id for x in ast.walk(loop.target) if isinstance(x, ast.Name)}
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == name and _plain(n.func.value) == receiver
               and any(_as_is(arg, carried) for arg in n.args)
               for n in ast.walk(func))


def _as_is(arg: ast.AST, carried: set[str]) -> bool:
    """An argument that passes a carried value on unchanged or scaled (``v``, ``losses[k]``,
    ``v * n``), not one computed by a call (``self.loss_fn(self.net(x), y)``)."""
    return not any(isinstance(n, ast.Call) for n in ast.walk(arg)) and any(
        x.id in carried for x in bare_names(arg) + [n.value for n in ast.walk(arg)
                                                    if isinstance(n, ast.Subscript)
                                                    and isinstance(n.value, ast.Name)])


def _passed_call(frame: FrameType, owner: str, name: str) -> Location | None:
    """For ``owner`` a variable of ``frame``: the call of ``<param>.<name>(...)`` in a function
    of the user's code that the frame passes it to (``update_meter(meter, losses, n)``)."""
    if not owner.isidentifier():
        return None
    code = frame.f_code
    tree = function_node(code)
    if tree is None:
        return None
    scope = {**frame.f_globals, **frame.f_locals}
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Name)), key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        callee = getattr(scope.get(call.func.id), "__code__", None)  # type: ignore[attr-defined]
        if not isinstance(callee, CodeType) or not is_user_code(callee):
            continue
        params = [callee.co_varnames[i] for i, arg in enumerate(call.args[:callee.co_argcount])
                  if isinstance(arg, ast.Name) and arg.id == owner]
        params += [k.arg for k in call.keywords if isinstance(k.value, ast.Name)
                   and k.value.id == owner and k.arg]
        for param in params:
            found = frame_call(callee, param, name)
            if found is not None:
                return found
    return None
