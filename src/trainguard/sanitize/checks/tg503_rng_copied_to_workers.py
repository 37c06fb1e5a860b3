"""TG503 rng-copied-to-workers: a generator object stored on a Dataset is copied into every
DataLoader worker, so all workers draw the same numbers.

What it watches: each pass over a DataLoader (``on_loader_iter``, once per epoch) with
``num_workers > 0``. It looks at the dataset (and the datasets inside a ``Subset``,
``ConcatDataset`` or any wrapper's ``dataset``/``datasets``) for attributes holding a generator
object: ``numpy.random.Generator`` (``np.random.default_rng``), ``numpy.random.RandomState``,
``random.Random`` or ``torch.Generator``. It reads the bytecode of the class's ``__getitem__``
(``__iter__`` for an ``IterableDataset``) and of the methods it calls on ``self``, once per class.

When it fires: such an attribute is read in ``__getitem__`` and never reassigned there, neither
``__getitem__`` nor the DataLoader's ``worker_init_fn`` touches it (or calls
``torch.utils.data.get_worker_info`` on the dataset, or ``torch.initial_seed``). Each worker
process gets a copy of the dataset with the generator's state as it was when the workers started,
so every worker draws the same sequence: with 4 workers, 4 consecutive batches get the same
"random" crops. Reported once per dataset class and attribute, at the line of the class that
stores the generator (``self.rng = np.random.default_rng(0)`` in ``__init__``: the cause), else at
the user's line that iterates the DataLoader; when several are reported at one line, its message
names them all. A generator kept by a class of another file than the one that built the
DataLoader (a helper module's transform) is reported at the DataLoader's construction, where a
``worker_init_fn`` goes, naming the line that made it. A user ``worker_init_fn`` that does
nothing (``pass``, a docstring: the reseed's placeholder) gets it at its body (torchsig#361).

Silent on: ``num_workers=0``; the global functions (``np.random.rand``, ``random.random``,
``torch.rand``) in ``__getitem__``: PyTorch reseeds ``random``, torch and (since 1.9, pytorch#56488)
numpy's global generator in every worker from ``base_seed + worker_id``
(``torch/utils/data/_utils/worker.py``); generators the dataset never draws from in
``__getitem__``; a ``random.SystemRandom`` (drawn from the OS); datasets that build their
generator per worker (``get_worker_info().seed``) or per item, or reseed it per item in the
scanned code (``self.rs.seed(1000 + i)``, ``self.g.manual_seed(i)``, ``set_state``/``setstate``,
``self.rng.bit_generator.state = ...``: each item's draws are then fixed by the item, whatever the
worker); a ``worker_init_fn`` that reseeds the attribute. Reading ``get_worker_info()`` in
``__getitem__``/``__iter__`` (to shard an ``IterableDataset``, to return the worker id) does not
by itself silence it: the generator must be stored or reseeded there.

Also held further down (``core/rng_holders.py``): a generator made in the ``__init__`` of a
transform the dataset holds directly, in a list, in a Compose-like object or an ``nn.Module``
container (the class in the script or a helper module). Reported when ``__getitem__`` reads the
dataset attribute that leads to it and the transform's ``__call__``/``forward`` (or a method
``__getitem__`` calls on it) draws from it, at the ``__init__`` line that made it (the dataset's
line that made it when the transform only keeps a generator handed to it, or that built the
transform when another of its methods made it: ``TimeMask(6).set_random_state(seed)``); silent when that
code makes it per worker (``get_worker_info``, ``torch.initial_seed``, assigns it) or reseeds it
per call, or the ``worker_init_fn`` assigns it or calls a method that does. When the transforms
share one generator object that the dataset also stores (``self.rs = RandomState(seed);
self.flip = Flip(self.rs)``), one finding at the dataset's line, with an in-place reseed as the fix.

Cost: per DataLoader pass with workers, the dataset's attributes (wrapped datasets 5 levels deep),
its object graph (at most 256 objects) and the bytecode of its class's ``__getitem__``/``__iter__`` (cached per class).

Reference: "Randomness in multi-process data loading"
(https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading); the FAQ "My
data loader workers return identical random numbers"
(https://pytorch.org/docs/stable/notes/faq.html); wolny/pytorch-3dunet#32; TorchDSP/torchsig#343; Project-MONAI/MONAI#1068 and #398.
"""

from __future__ import annotations

import dis
import os
import weakref
from types import CodeType, FunctionType
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import is_user_code
from trainguard.sanitize.core.source import attribute_store, setter_call, stored_in_init
from trainguard.sanitize.core.rng_holders import (Held, callable_names, code_names, held_rngs,
                                                 init_body, made_by, made_in_call, passed_in,
                                                 rng_kind)
from trainguard.sanitize.core.live_guard import only_skipped_stores

_RESEEDS_PER_WORKER = {"get_worker_info", "initial_seed"}
_INDIRECT_STORES = {"setattr", "__dict__", "__setattr__"}
_RESEED_METHODS = {"seed", "manual_seed", "set_state", "setstate"}
_RESEED = {  # reseeding the one object in place, for every holder that shares it
    "numpy Generator": ".bit_generator.state = np.random.default_rng(info.seed).bit_generator.state",
    "numpy RandomState": ".seed(info.seed % 2**32)",
    "random.Random": ".seed(info.seed)",
    "torch.Generator": ".manual_seed(info.seed)",
}
_CALLED = {"__call__", "forward"}  # what calling a transform object runs
_FIX = {
    "numpy Generator": "np.random.default_rng(info.seed)",
    "numpy RandomState": "np.random.RandomState(info.seed % 2**32)",
    "random.Random": "random.Random(info.seed)",
    "torch.Generator": "torch.Generator().manual_seed(info.seed)",
}


class RngCopiedToWorkers(Check):
    code = "TG503"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.names: dict[type, tuple[str, set[str], set[str]]] = {}  # per dataset class
        # per (class holding a generator below the dataset, dataset class): (attribute -> the
        # method drawing from it, names loaded, attributes stored or reseeded) in the methods the
        # dataset's entry calls on it
        self.holders: dict[tuple[type, type], tuple[dict[str, str], set[str], set[str]]] = {}
        self.reported: set[tuple[type, str]] = set()
        # per finding (by id): its first message and the class.attribute pairs it stands for
        self.places: dict[int, tuple[str, list[str]]] = {}
        self.built: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def on_built(self, obj: Any, where: Any) -> None:
        if hasattr(obj, "num_workers") and where is not None:  # a DataLoader: where it was built
            self.built[obj] = where

    def _placed(self, loader: Any, where: Any, origin: Any = None) -> tuple[Any, str]:
        """Where to report a generator found at ``where`` and kept by a class at ``origin``
        (default: ``where``): ``where`` when the DataLoader was built in the same file as that
        class; else at the DataLoader's construction, where a ``worker_init_fn`` goes (the
        class belongs to a helper module that serves other loaders), naming ``where``; at the
        body of the user's ``worker_init_fn`` when it does nothing (a ``pass`` placeholder)."""
        built, origin = self.built.get(loader), origin or where
        if where is not None and (body := init_body(getattr(loader, "worker_init_fn", None))):
            return body, (f" (stored at {os.path.basename(where[0])}:{where[1]}; this empty "
                          "worker_init_fn is where each worker's reseed goes)")
        if where is None or built is None or origin is None or built[0] == origin[0]:
            return where, ""
        return built, (f" (made at {os.path.basename(where[0])}:{where[1]}; this DataLoader is "
                       f"where a worker_init_fn goes)")

    def on_loader_iter(self, loader: Any) -> None:
        workers = getattr(loader, "num_workers", 0) or 0
        if workers <= 0:
            return
        init_names = callable_names(getattr(loader, "worker_init_fn", None))
        for path, dataset in _datasets(getattr(loader, "dataset", None), "info.dataset"):
            try:
                attributes = vars(dataset)
            except TypeError:
                continue
            rngs = [(a, k) for a, v in attributes.items() if (k := rng_kind(v)) is not None]
            held = held_rngs(dataset, rng_kind)
            if not rngs and not held:
                continue
            cls = type(dataset)
            if cls not in self.names:
                self.names[cls] = _entry_names(cls)
            entry, loaded, stored = self.names[cls]
            if not entry or _made_per_worker(loaded):
                continue
            for found in held:
                if found.first in loaded and found.first not in stored:
                    self._held(loader, workers, init_names, path, dataset, entry, loaded, found,
                               {id(attributes[a]): a for a, _ in rngs})
            for attr, kind in rngs:
                if (cls, attr) in self.reported or attr not in loaded or attr in stored and \
                        not only_skipped_stores(dataset, _methods(cls), attr, stored):
                    continue
                if init_names is not None and (
                        attr in init_names or {"get_worker_info", "dataset"} <= init_names):
                    continue
                self.reported.add((cls, attr))
                init = ("" if init_names is None else
                        f"; its worker_init_fn {_name(loader.worker_init_fn)} does not reseed it")
                # made by a setter __init__ calls (a mixin's set_random_state(seed)): that call
                where, made = self._placed(loader, setter_call(cls, attr)
                                           or attribute_store(cls, attr))
                finding = self.report(
                    f"DataLoader(num_workers={workers}) gives every worker a copy of "
                    f"{cls.__name__}.{attr} (a {kind} made before the workers start{made}), and "
                    f"{cls.__name__}.{entry} draws from it{init}: all {workers} workers draw the "
                    "same numbers, so the random augmentations repeat across workers",
                    fix=f"reseed it in each worker with a worker_init_fn that runs `info = "
                        f"torch.utils.data.get_worker_info(); {path}.{attr} = {_FIX[kind]}`, "
                        "or draw from the np.random.* / torch.* global functions, which PyTorch "
                        "reseeds in every worker",
                    where=where)
                self._merge(finding, f"{cls.__name__}.{attr}")

    def _held(self, loader: Any, workers: int, init_names: set[str] | None, path: str,
              dataset: Any, entry: str, entry_loaded: set[str], found: Held,
              direct: dict[int, str]) -> None:
        """A generator held by an object the dataset holds (a transform): reported when that
        object's class draws from it outside ``__init__`` and nothing reseeds it per worker."""
        holder, cls = type(found.holder), type(dataset)
        key = (holder, found.attr)
        if key in self.reported:
            return
        if (holder, cls) not in self.holders:
            self.holders[(holder, cls)] = _holder_names(holder, entry_loaded)
        drawn_in, loaded, stored = self.holders[(holder, cls)]
        draw = drawn_in.get(found.attr)
        if draw is None or _made_per_worker(loaded) or found.attr in stored and not \
                only_skipped_stores(found.holder, _methods(holder), found.attr, stored):
            return  # never drawn from in a worker, reseeded per call, or made per worker
        # the same generator object also stored on the dataset (``self.rs = RandomState(seed);
        # self.flip = Flip(self.rs)``): the dataset's line made it, and one reseed in place there
        # fixes every transform that shares it
        shared = direct.get(id(getattr(found.holder, found.attr, None)))
        if shared is not None and (cls, shared) in self.reported:
            return
        if init_names is not None and (found.attr in init_names or shared in init_names
                                       or _reseeds_through(init_names, (cls, holder), found.attr)):
            return
        where = attribute_store(cls, shared) if shared else None
        where = where or attribute_store(holder, found.attr)
        if where is None:
            return  # made by library code: nothing the user can fix at a line of theirs
        if shared is None and not stored_in_init(holder, found.attr):
            # made by a setter the dataset called on the transform
            # (``RandCrop(24).set_random_state(seed)``, a mixin's method): the dataset's line
            # that built and stored the transform is where its generator was made
            where = attribute_store(cls, found.first) or where
        kept = ""
        if shared is None and passed_in(where, found.attr):  # kept, not made: where it was made
            generator = getattr(found.holder, found.attr, None)
            made = [(w, a) for a in made_by(dataset, generator) if (w := attribute_store(cls, a))
                    and not passed_in(w, a)]
            if made:
                where, kept = made[0][0], f", made as {cls.__name__}.{made[0][1]}"
            elif (built := made_in_call(attribute_store(cls, found.first))) is not None:
                where, kept = built, f", made where {cls.__name__}.{found.first} is built"
        self.reported.add(key)
        init = ("" if init_names is None else
                f"; its worker_init_fn {_name(loader.worker_init_fn)} does not reseed it")
        where, made = self._placed(loader, where, attribute_store(holder, found.attr))
        kept += made
        reach = f"{path}{found.path}"
        fix = f"{reach}.{found.attr} = {_FIX[found.kind]}"
        if shared is not None:
            self.reported.add((cls, shared))
            fix = f"{path}.{shared}{_RESEED[found.kind]}"
        finding = self.report(
            f"DataLoader(num_workers={workers}) gives every worker a copy of "
            f"{holder.__name__}.{found.attr} (a {found.kind} made before the workers "
            f"start{kept}, held by the dataset as {reach.replace('info.dataset', cls.__name__, 1)}"
            f"{f', the same object as {cls.__name__}.{shared}' if shared else ''}), and "
            f"{holder.__name__}.{draw} draws from it when {cls.__name__}.{entry} runs{init}: all "
            f"{workers} workers draw the same numbers, so the random augmentations repeat across "
            "workers",
            fix=f"reseed it in each worker with a worker_init_fn that runs `info = "
                f"torch.utils.data.get_worker_info(); {fix}`, or draw from the np.random.* / "
                "torch.* global functions, which PyTorch reseeds in every worker",
            where=where)
        self._merge(finding, f"{holder.__name__}.{found.attr}")

    def _merge(self, finding: Any, pair: str) -> None:
        """Name every dataset class and attribute reported at one line in that line's message
        (findings at the same place are merged into the first one)."""
        if finding is None:
            return
        first, pairs = self.places.setdefault(id(finding), (finding.message, []))
        if pair not in pairs:
            pairs.append(pair)
        if len(pairs) > 1:
            finding.message = (f"{first}; the same for {', '.join(pairs[1:])} iterated at this "
                               "line")


def _made_per_worker(loaded: set[str]) -> bool:
    """The scanned code may build its generators per worker by a route the attribute scan cannot
    follow: it reads ``get_worker_info``/``torch.initial_seed`` and writes attributes by name
    (``setattr``, ``__dict__``). Reading the worker's id alone (sharding an ``IterableDataset``,
    returning the id with the item) leaves the copied generator as it was."""
    return bool(loaded & _RESEEDS_PER_WORKER) and bool(loaded & _INDIRECT_STORES)


def _datasets(dataset: Any, path: str, depth: int = 0) -> list[tuple[str, Any]]:
    """``(path, dataset)`` for ``dataset`` and the datasets it wraps (``Subset.dataset``,
    ``ConcatDataset.datasets``); ``path`` is how a worker reaches it from ``info.dataset``."""
    if dataset is None or depth > 4:
        return []
    out = [(path, dataset)]
    inner, inner_list = _attribute(dataset, "dataset"), _attribute(dataset, "datasets")
    if inner is not None and inner is not dataset:
        out += _datasets(inner, f"{path}.dataset", depth + 1)
    for i, item in enumerate(inner_list if isinstance(inner_list, (list, tuple)) else ()):
        out += _datasets(item, f"{path}.datasets[{i}]", depth + 1)
    return out


def _attribute(obj: Any, name: str) -> Any:
    """``obj.name``, or None when reading it fails (a property of a third-party dataset)."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _entry_names(cls: type) -> tuple[str, set[str], set[str]]:
    """(entry method name, names it and the methods it calls on the class load, attributes they
    store or reseed); ``("", ...)`` when the class has no Python entry method. Reseeding is a call
    of ``seed``/``manual_seed``/``set_state``/``setstate`` on the attribute, or an assignment to
    its ``bit_generator.state``: every draw that follows is fixed by the item, not by the worker."""
    from torch.utils.data import IterableDataset

    entry = "__iter__" if issubclass(cls, IterableDataset) else "__getitem__"
    function = getattr(cls, entry, None)
    if not isinstance(function, FunctionType) or function.__module__.startswith("torch."):
        return "", set(), set()
    loaded, stored = _scan(cls, [function.__code__])
    return entry, loaded, stored


def _scan(cls: type, codes: list[CodeType]) -> tuple[set[str], set[str]]:
    """Names ``codes`` and the methods of ``cls`` they call load, and the attributes they store or
    reseed (see :func:`_entry_names`)."""
    loaded: set[str] = set()
    stored: set[str] = set()
    pending: list[CodeType] = list(codes)
    seen: set[CodeType] = set()
    while pending:
        code = pending.pop()
        if code in seen:
            continue
        seen.add(code)
        # the attribute names of the ``self.a.b`` chain being loaded (None: not from a local)
        chain: list[str] | None = None
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and chain is not None:
                if ins.argval in _RESEED_METHODS and chain:
                    stored.add(chain[-1])  # ``self.rs.seed(1000 + i)``: reseeded per item
                chain.append(ins.argval)
            elif (ins.opname == "STORE_ATTR" and ins.argval == "state" and chain
                  and len(chain) > 1 and chain[-1] == "bit_generator"):
                stored.add(chain[-2])  # ``self.rng.bit_generator.state = ...``
                chain = None
            else:
                chain = [] if ins.opname in ("LOAD_FAST", "LOAD_DEREF") else None
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_NAME"):
                name = ins.argval if isinstance(ins.argval, str) else str(ins.argval)
                loaded.add(name)
                method = getattr(cls, name, None) if ins.opname != "LOAD_GLOBAL" else None
                method = getattr(method, "__func__", method)  # classmethod / staticmethod
                if isinstance(method, FunctionType) and not method.__module__.startswith("torch."):
                    pending.append(method.__code__)
            elif ins.opname == "STORE_ATTR":
                stored.add(ins.argval)
        pending.extend(c for c in code.co_consts if isinstance(c, CodeType))
    return loaded, stored


def _methods(cls: type) -> list[FunctionType]:
    """The user-code methods of ``cls`` and its bases other than ``__init__``."""
    out: dict[str, FunctionType] = {}
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            value = getattr(value, "__func__", value)
            if (name not in out and name != "__init__" and isinstance(value, FunctionType)
                    and is_user_code(value.__code__)):
                out[name] = value
    return list(out.values())


def _holder_names(cls: type, called: set[str]) -> tuple[dict[str, str], set[str], set[str]]:
    """For a class holding a generator, from the methods a worker runs on it (``__call__``,
    ``forward``, and those the dataset's entry names in ``called``) and the methods they call on
    ``self``: attribute -> the method that reads it, the names loaded, the attributes stored or
    reseeded."""
    methods = [m for m in _methods(cls) if m.__name__ in called or m.__name__ in _CALLED]
    loaded, stored = _scan(cls, [m.__code__ for m in methods])
    drawn_in: dict[str, str] = {}
    for method in methods + _methods(cls):
        if method.__name__ in loaded or method in methods:
            for name in code_names(method.__code__):
                drawn_in.setdefault(name, method.__name__)
    return drawn_in, loaded, stored


def _reseeds_through(init_names: set[str], classes: tuple[type, ...], attr: str) -> bool:
    """A ``worker_init_fn`` that calls a method of the dataset or of the holder
    (``info.dataset.transform.set_random_state(seed)``) which stores or reseeds ``attr``."""
    for cls in classes:
        for name in init_names:
            method = getattr(cls, name, None)
            method = getattr(method, "__func__", method)
            if isinstance(method, FunctionType) and attr in _scan(cls, [method.__code__])[1]:
                return True
    return False


def _name(fn: Any) -> str:
    fn = getattr(fn, "func", fn)
    return getattr(fn, "__qualname__", None) or type(fn).__name__
