"""TG404 batchnorm-batch-of-one: BatchNorm trained on one value per channel.

What it watches: nothing on a healthy step (no BatchNorm call goes through the watcher). When the
run dies of PyTorch's ``ValueError: Expected more than 1 value per channel when training``, it reads
the module that raised (the watcher notes the innermost failing module), its name inside the model,
the input size from the message, and, once, the live ``DataLoader`` objects (``gc``) to find the one
whose last batch holds a single sample.

When it fires: on that error; when the script catches it (``except ValueError:`` around the
step), at the end of the run, with the same diagnosis read at the failure. Reported at the cause
when it is known: the line that built the DataLoader whose last batch holds one sample (the
watcher notes where user code builds each DataLoader; the one iterated last is preferred), or
whose every batch is one sample (``batch_size=1``: at the configuration entry that sets it to 1
when the loader reads one, a dict literal's ``"batch_size": 1``, an ``add_argument`` default or a
config class field's default; huaifeng1993/DFANet#9; likewise ``drop_last``, eth-easl/modyn#550),
or the ``batch_size`` entry of the options dict literal it unpacks
(``DataLoader(ds, **cfg["train_loader"])`` with no ``drop_last`` there; the call's own
``drop_last=False`` when it passes one). A larger last batch that the code between the loader and
the model split further (shards over replicas, chunks: fastai/fastai#1352) is the cause when the
error came in that last batch of the pass, after the full batches went through: reported at the
same places. A batch of one built without a loader (``torch.randn(args.batch_size, ...)``),
when a user function on the stack reads a batch-size setting whose live value is 1: at the
file's one entry setting it to 1 (:mod:`..core.batch_setting`, open-mmlab/mmsegmentation#272).
Else at the user's line that called the model with that batch (the outermost module call: the
batch is the caller's, not the layer's), else at the failing line. Batches sliced by hand have no
DataLoader:
a ``for i in range(0, n, bs)`` loop (or a ``while start < n:`` advancing ``start += bs``)
around the calling line, or around the ``yield`` of a suspended generator of user code, whose
last chunk is one sample is the cause, reported at that loop's first line
(:mod:`trainguard.sanitize.core.batching`); a loop over a list of batches made beforehand
(``batches = [perm[i:i + bs] for ...]``, ``perm.split(bs)``) at its last batch, of one sample,
at the statement that made the list. In eager PyTorch 2.x every BatchNorm call in training
mode with one value per channel raises this error (``BatchNorm1d`` on ``(1, C)`` or ``(1, C, 1)``,
``BatchNorm2d`` on ``(1, C, 1, 1)``), so the error is where the pitfall shows. The diagnosis names
the layer and, where found, the loader (``len(dataset) % batch_size == 1``) and the fix.

Silent on: ``BatchNorm2d`` on ``(1, C, H, W)`` with ``H * W > 1`` and ``BatchNorm1d`` on
``(1, C, L)`` with ``L > 1`` (several values per channel: PyTorch trains on them), evaluation mode.

Cost: only at PyTorch's batch-of-one error: one pass over the models' modules and one scan of the
heap for DataLoaders (``bounds.live_objects``).

Reference: ``BatchNorm1d`` docs https://pytorch.org/docs/stable/generated/torch.nn.BatchNorm1d.html;
forum thread https://discuss.pytorch.org/t/batch-norm-training-when-batch-size-1/102979.
"""

from __future__ import annotations

import ast
import re
import weakref
from collections import deque
from typing import Any

from trainguard.sanitize.core.batch_setting import batch_size_read
from trainguard.sanitize.core.batching import partial_range_loop
from trainguard.sanitize.core.bounds import live_objects
from trainguard.sanitize.core.caught import Caught
from trainguard.sanitize.core.check import Check, Diagnosis
from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.source import SourceFile

_MESSAGE = "Expected more than 1 value per channel when training"
_SIZE = re.compile(r"input size torch\.Size\(\[([\d, ]*)\]\)")


class BatchNormBatchOfOne(Check):
    code = "TG404"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.built: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        # (id, description, line) of the last DataLoaders built that leave a batch of one: a
        # loader built in the ``for`` statement itself is gone once its iterator runs
        self.partial: deque[tuple[int, str, Any]] = deque(maxlen=16)
        self.failed_at: Any = None
        # [message, layer, the partial loader's description, its line, call line] per error
        self.caught = Caught(4)

    def on_forward_failed(self, module: Any, exc: BaseException, where: Any) -> None:
        if isinstance(exc, ValueError) and _MESSAGE in str(exc):
            self.failed_at = where  # the user's line that called the model with that batch
            held = self.caught.get(exc)
            if held is not None:  # an outer module call of the same failure
                held[4] = where
            elif not self.caught.full:  # read now: the loader may be gone by the end of the run
                found = _partial_loader(self.state.loader_id)
                # batches sliced by hand (the loop or generator that slices them) come first,
                # unless the partial loader is the one the run iterates
                iterated = found is not None and id(found[0]) == self.state.loader_id
                recorded = None if iterated else self._recorded()
                sliced = None if iterated or recorded else partial_range_loop()
                # a last partial batch split further (over replicas) of the iterated loader
                # before a live loader the run does not iterate (one left from earlier work)
                split = None if iterated or recorded or sliced else self._last_partial(str(exc))
                # a batch built by hand, without a loader: the batch-size setting it read
                # (before a live loader the run does not iterate)
                read = None if iterated or recorded or sliced or split else \
                    _setting_of_one(str(exc))
                loader, built = sliced or recorded or split or read or (
                    (found[1], self._cause_at(found[0])) if found else (None, None))
                self.caught.hold(exc, [str(exc), _layer_name(self.state), loader, built, where])

    def _cause_at(self, loader: Any) -> Any:
        """Where the loader was built, or the configuration entry that set its batch size to 1."""
        return _size_written(loader, self.built.get(loader))

    def on_built(self, obj: Any, where: Any) -> None:
        if hasattr(obj, "drop_last") and hasattr(obj, "batch_size") and where is not None:
            self.built[obj] = where  # a DataLoader (not a sampler): where it was built
            found = _partial([obj])
            if found is not None:
                self.partial.append((id(obj), found[1], self._cause_at(obj)))

    def _last_partial(self, text: str) -> tuple[str, Any] | None:
        """``(description, line)`` of the DataLoader the run iterates when the failing batch
        is part of its last, partial batch: its pass has given its last batch (all the full
        ones before it went through), that batch holds ``len(dataset) % batch_size`` samples,
        more than the failing input's one (the batch was split further: shards over replicas,
        chunks); its line the loader's (or the config entry setting ``drop_last=False``).
        None otherwise (pytorch/pytorch#7716: DataParallel scattering a last batch)."""
        m = _SIZE.search(text)
        rows = int(m.group(1).split(",")[0]) if m and m.group(1).strip() else None
        noted = next((p for p in reversed(list(self.state.loader_passes))
                      if p.loader_id == self.state.loader_id), None)
        loader = next((o for o in list(self.built.keys()) if id(o) == self.state.loader_id),
                      None)
        if rows is None or noted is None or noted.ended or loader is None or \
                not noted.length or noted.length < 2 or noted.given != noted.length:
            return None
        size = getattr(loader, "batch_size", None)
        try:
            n = len(loader.dataset)
        except Exception:  # (an IterableDataset; a dataset whose __len__ fails)
            return None
        last = n % size if size else 0
        if loader.drop_last or not rows < last < size:
            return None
        return (f"DataLoader(batch_size={size}) over {n} samples ends each pass with a partial "
                f"batch of {last} samples", self._cause_at(loader))

    def _recorded(self) -> tuple[Any, Any] | None:
        """``(description, line)`` of the DataLoader the run iterates last when, at its
        construction, it left a batch of one (a loader no name holds any more); else None."""
        return next(((r[1], r[2]) for r in reversed(self.partial)
                     if r[0] == self.state.loader_id), None)

    def on_error(self, exc: BaseException) -> Diagnosis | None:
        if not isinstance(exc, ValueError) or _MESSAGE not in str(exc):
            return None
        held = self.caught.claim(exc)
        if held is None:
            found = _partial_loader(self.state.loader_id)
            recorded = None if found is not None and id(found[0]) == self.state.loader_id \
                else self._recorded()
            loader, built = recorded or ((found[1], self._cause_at(found[0])) if found
                                         else (None, None))
            if loader is None:
                loader, built = self._last_partial(str(exc)) or (None, None)
            held = [str(exc), _layer_name(self.state), loader, built, self.failed_at]
        return _diagnose(*held)

    def on_exit(self) -> None:
        """Batch-of-one errors the script caught (``except ValueError:``: the batch skipped, or
        training stopped early)."""
        for held in self.caught.drain():
            found = _diagnose(*held)
            self.report(f"{found.message}; the script caught the error", fix=found.fix,
                        where=found.where or held[4])


def _diagnose(text: str, layer: str, loader: str | None, built: Any, call: Any) -> Diagnosis:
    """The diagnosis of PyTorch's batch-of-one error ``text`` raised by ``layer``; ``loader``
    describes a DataLoader whose last batch holds one sample (built at ``built``), when found."""
    m = _SIZE.search(text)
    size = tuple(int(s) for s in m.group(1).split(",") if s.strip()) if m else None
    seen = f"input size {size}" if size else "its input"
    batch = (f"a batch of {size[0]} sample{'s' if size[0] != 1 else ''}"
             if size else "this batch")
    if loader is None:
        where_from = " (often the last, partial batch of an epoch)"
    elif loader == "DataLoader(batch_size=1)":
        where_from = f"; the {loader} gives it one sample in every batch"
    elif loader.startswith("batch size "):
        where_from = (f"; the {loader} read to build it is set here, so every batch holds one "
                      "sample")
    elif "partial batch" in loader:
        where_from = (f"; this {loader}, and the error came in that last batch (the full batches "
                      "before it went through): the code between the loader and the model split "
                      "it into parts (shards over replicas, chunks), one of them a single sample")
    elif built is not None:
        # at the cause: the DataLoader's construction, where drop_last belongs
        where_from = (f"; this {loader} leaves a last batch of one sample, which reached the "
                      f"model at {short_location(call, 'the failing line')}")
    else:
        where_from = f"; {loader} leaves a last batch of one sample"
    return Diagnosis(
        f"{layer} got {seen} in training mode: {batch} gives it one value per channel, so the "
        f"batch variance is undefined{where_from}",
        fix="use a batch size of 2 or more, or GroupNorm/LayerNorm for single-sample batches"
            if loader == "DataLoader(batch_size=1)" or (loader or "").startswith("batch size ")
            else
            ("skip the last partial batch (end the range at n - n % batch_size), "
             if (loader or "").startswith("batching loop") else
             "pass drop_last=True to the training DataLoader, ") +
            "use a batch size that does not leave one sample, or use GroupNorm/LayerNorm for "
            "single-sample batches",
        where=built or call)


def _size_written(loader: Any, built: Any) -> Any:
    """Where a batch size of 1 was written, when the DataLoader built at ``built`` read it from a
    configuration entry (``batch_size=cfg["batch_size"]``, ``args.batch_size``) that one dict
    literal or ``add_argument`` default of the same file sets to 1 (a config with
    ``"batch_size": 1``, huaifeng1993/DFANet#9): the line to change. Likewise, for a larger batch
    size that leaves a last batch of one, where ``drop_last=False`` was written when the loader
    read it from such an entry (``drop_last=cfg["drop_last"]``, or ``config.drop_last_batch``
    of a config class whose field defaults to False, eth-easl/modyn#550), or the options dict it
    unpacks (``**cfg["train_loader"]``) when that dict literal sets the batch size and no
    ``drop_last``; or the call's own ``drop_last=False``, on whatever line of the call it is
    written. Else ``built``."""
    if built is None:
        return built
    size = getattr(loader, "batch_size", None)
    arg, value = ("batch_size", 1) if size == 1 else ("drop_last", False)
    if size is None or arg == "drop_last" and getattr(loader, "drop_last", None) is not False:
        return built
    file = SourceFile.load(built[0])
    call = file.call_at(built[1], built[2] - 1) if file is not None else None
    given = next((k.value for k in call.keywords if k.arg == arg), None) \
        if call is not None else None
    if arg == "drop_last" and isinstance(given, ast.Constant) and given.value is False:
        return (built[0], given.lineno, given.col_offset + 1)
    if given is None and call is not None and not any(k.arg == "batch_size"
                                                      for k in call.keywords):
        found = _options_entry(file, call, size)
        return (built[0], found.lineno, found.col_offset + 1) if found is not None else built
    key = given.slice.value if isinstance(given, ast.Subscript) and isinstance(
        given.slice, ast.Constant) else given.attr if isinstance(given, ast.Attribute) else None
    if not isinstance(key, str):
        return built
    found = _entries(file, key, value)
    return (built[0], found[0].lineno, found[0].col_offset + 1) if len(found) == 1 else built


def _options_entry(file: Any, call: ast.Call, size: int) -> Any:
    """The ``batch_size`` value node of the one dict literal that a DataLoader call unpacks
    (``DataLoader(ds, **cfg["train_loader"])``: the literal stored under that key anywhere in
    the file) and that sets the loader's batch size and no ``drop_last``: the options where
    ``drop_last=True`` belongs. None when there is none or several."""
    unpacked = [k.value for k in call.keywords if k.arg is None]
    keys = {u.slice.value if isinstance(u, ast.Subscript) else u.attr for u in unpacked
            if isinstance(u, ast.Subscript) and isinstance(u.slice, ast.Constant)
            or isinstance(u, ast.Attribute)}
    found = []
    for node in file.parents:
        if not isinstance(node, ast.Dict):
            continue
        for k, v in zip(node.keys, node.values):
            if not (isinstance(k, ast.Constant) and k.value in keys and isinstance(v, ast.Dict)):
                continue
            entries = {o.value: w for o, w in zip(v.keys, v.values) if isinstance(o, ast.Constant)}
            sized = entries.get("batch_size")
            if "drop_last" not in entries and isinstance(sized, ast.Constant) and \
                    sized.value == size:
                found.append(sized)
    return found[0] if len(found) == 1 else None


def _entries(file: Any, key: str, value: Any) -> list[Any]:
    """The value nodes of ``file``'s dict literal entries, ``add_argument`` defaults and class
    attribute defaults (a config dataclass's ``drop_last: bool = False``) for the configuration
    key ``key`` that set it to the constant ``value`` (1, or False). With a class default, also
    the calls that pass ``key=value`` (``LoaderCfg(drop_last=False)``): a default that such a
    call may override is not the one place that set it."""
    names = {key, "--" + key, "--" + key.replace("_", "-")}
    same = (lambda v: isinstance(v, ast.Constant) and type(v.value) is type(value)
            and v.value == value)
    found, fields, passed = [], [], []
    for node in file.parents:
        if isinstance(node, ast.Dict):
            found += [v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)
                      and k.value == key and same(v)]
        elif isinstance(node, ast.ClassDef):
            fields += [s.value for s in node.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                       and any(isinstance(t, ast.Name) and t.id == key for t in
                               (s.targets if isinstance(s, ast.Assign) else [s.target]))
                       and s.value is not None and same(s.value)]
        elif isinstance(node, ast.Call):
            passed += [k.value for k in node.keywords if k.arg == key and same(k.value)]
            if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument" and \
                    any(isinstance(a, ast.Constant) and a.value in names for a in node.args):
                found += [k.value for k in node.keywords if k.arg == "default" and same(k.value)]
    return found + fields + passed if fields else found


def _setting_of_one(text: str) -> tuple[str, Any] | None:
    """``(description, line)`` of the batch-size setting equal to 1 that the code feeding a
    batch of one sample (``text``: the error's input size) read, when no DataLoader made the
    batch (``torch.randn(args.batch_size, ...)``, :mod:`..core.batch_setting`): the one literal
    entry of that file setting it to 1 (an ``add_argument`` default, a dict literal's entry, a
    config class field's default). None otherwise."""
    m = _SIZE.search(text)
    if not m or not m.group(1).strip() or int(m.group(1).split(",")[0]) != 1:
        return None
    read = batch_size_read()
    file = SourceFile.load(read[0]) if read is not None else None
    found = _entries(file, read[1], 1) if file is not None else []
    if len(found) != 1:
        return None
    return (f"batch size `{read[2]}` = 1", (read[0], found[0].lineno, found[0].col_offset + 1))


def _layer_name(state: Any) -> str:
    module = state.failed_module
    if module is None:
        return "a BatchNorm layer"
    kind = type(module).__name__
    for model in list(state.models):
        for qual, sub in model.named_modules():
            if sub is module and qual:
                return f"{kind} `{qual}` of {type(model).__name__}"
    return kind


def _partial_loader(last_id: int) -> tuple[Any, str] | None:
    """A live DataLoader whose last batch holds one sample, and its description; the one
    iterated last (``last_id``) first."""
    from torch.utils.data import DataLoader

    # type(), not isinstance: some objects warn on __class__
    return _partial(live_objects(lambda o: DataLoader in type(o).__mro__), last_id)


def _partial(loaders: Any, last_id: int = 0) -> tuple[Any, str] | None:
    """The first of ``loaders`` whose last batch holds one sample (``last_id``'s first), and its
    description."""
    found = []
    for obj in loaders:
        size = obj.batch_size
        try:
            n = len(obj.dataset)  # type: ignore[arg-type]
        except Exception:  # (an IterableDataset: no length; a dataset whose __len__ fails)
            continue
        if size == 1 and n > 1:
            found.append((obj, "DataLoader(batch_size=1)"))
        elif size and not obj.drop_last and n % size == 1:
            found.append((obj, f"DataLoader(batch_size={size}) over {n} samples"))
    found.sort(key=lambda item: id(item[0]) != last_id)
    return found[0] if found else None
