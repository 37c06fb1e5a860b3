"""``trainguard graph`` and ``trainguard explain``: run a script, inspect a global it leaves behind.

- ``trainguard graph script.py --tensor NAME [--depth N] [-o out.svg|.png|.dot] [--args '...']``
- ``trainguard explain script.py --tensor NAME [--format json]`` (NAME may also be an nn.Module)

Both run the script with its forward passes recorded (so cuts can be located), take the global
variable ``NAME`` from its namespace when it ends, and name parameters from the script's global
``nn.Module`` objects (``--model NAME`` picks one). Torch is imported only inside ``run``.
"""

from __future__ import annotations

import argparse
import sys
import tokenize
import traceback
from pathlib import Path
from typing import Any

from trainguard.cliargs import int_at_least, output_file, shell_words
from trainguard.errors import UsageError

GRAPH_SUFFIXES = (".dot", ".gv", ".svg", ".png", ".pdf")


def _script_arguments(parser: argparse.ArgumentParser, tensor_help: str) -> None:
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("--args", type=shell_words, default=[], metavar="'ARGS'",
                        dest="script_args",
                        help="arguments for the script, one quoted string (split like a shell; "
                        "default: none)")
    parser.add_argument("--tensor", required=True, metavar="NAME", help=tensor_help)
    parser.add_argument("--model", metavar="NAME",
                        help="global nn.Module naming the parameters (default: every global module)")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "explain", help="explain a tensor (or module) a script leaves behind: grad state, "
        "parameters reached, where a path was cut",
        description="Run SCRIPT with its forward passes recorded, take the global variable "
        "--tensor from its namespace at exit and explain it: leaf, requires_grad, grad_fn, the "
        "model parameters it reaches and, for those it does not, where the path was cut. For an "
        "nn.Module: train/eval flags of mode-dependent submodules, frozen parameter counts.")
    _script_arguments(parser, "global variable holding the tensor (e.g. loss) or an nn.Module")
    parser.add_argument("--format", choices=["text", "json"], default="text",
                        help="text: a report to read; json: the same as data")
    parser.set_defaults(func=run_explain)

    parser = subparsers.add_parser(
        "graph", help="draw a tensor's backward graph from a script (DOT, SVG, PNG)",
        description="Run SCRIPT, take the global variable --tensor from its namespace at exit "
        "and draw its backward graph: parameter names on leaves, saved tensor sizes, cuts "
        "marked; repeated blocks folded. Writes DOT to stdout unless -o is given; .svg/.png/.pdf "
        "need Graphviz's `dot` (apt install graphviz / conda install graphviz).")
    _script_arguments(parser, "global variable holding the tensor, e.g. loss")
    parser.add_argument("--depth", type=int_at_least(1), metavar="N",
                        help="draw nodes at most N edges from the tensor (default: all, unless "
                        "more than --max-nodes)")
    parser.add_argument("--max-nodes", type=int_at_least(2), default=150, metavar="N",
                        help="summarize graphs larger than this")
    parser.add_argument("-o", "--output", type=output_file(*GRAPH_SUFFIXES), metavar="FILE",
                        help="write .dot, .gv, .svg, .png or .pdf (default: DOT text to stdout)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import shutil

    from trainguard.explain.graph import GRAPHVIZ_HINT, graph
    from trainguard.explain.recording import record

    path = _script_path(args.script)
    rendered = args.output and Path(args.output).suffix.lower() in (".svg", ".png", ".pdf")
    if rendered and shutil.which("dot") is None:  # say so before the script runs, not after
        raise UsageError(f"-o {args.output}: {GRAPHVIZ_HINT}")
    with record() as rec:
        namespace = _run_script(path, args.script_args)
    tensor = _pick_tensor(namespace, args.tensor, path)
    model = _pick_model(namespace, args.model, path)
    result = graph(tensor, model=model, recording=rec, depth=args.depth,
                   max_nodes=args.max_nodes)
    if args.output:
        result.save(args.output)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(result.dot)
    summary = (f"graph: {result.nodes} of {result.total_nodes} nodes drawn; drawn ops saved "
               f"{result.saved_bytes:,} bytes for backward")
    if result.hidden_deeper:
        summary += f", {result.hidden_deeper} deeper nodes folded (use --depth to change)"
    for line in result.collapsed + result.cuts:
        summary += f"\n  {line}"
    print(summary, file=sys.stderr)
    return 0


def run_explain(args: argparse.Namespace) -> int:
    import json

    import torch

    from trainguard.explain.explainer import explain
    from trainguard.explain.recording import record

    path = _script_path(args.script)
    with record() as rec:
        namespace = _run_script(path, args.script_args)
    value = namespace.get(args.tensor)
    if isinstance(value, torch.nn.Module):
        report = explain(value)
    else:
        tensor = _pick_tensor(namespace, args.tensor, path)
        report = explain(tensor, model=_pick_model(namespace, args.model, path), recording=rec)
    print(json.dumps(report.to_dict(), indent=2) if args.format == "json" else report)
    return 0


def _script_path(script: str) -> Path:
    path = Path(script)
    if not path.is_file():
        raise UsageError(f"{script}: no such file; give the path of a Python script")
    return path


def _run_script(path: Path, argv: list[str]) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": str(path)}
    try:
        with tokenize.open(path) as file:  # honours a `# -*- coding: ... -*-` line, like python
            code = compile(file.read(), str(path), "exec")
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else str(path)
        raise UsageError(f"{where}: {exc.msg}; fix the script's syntax so that it can run") \
            from None
    except (UnicodeDecodeError, ValueError) as exc:  # bytes not in the file's encoding
        raise UsageError(f"{path}: cannot read it as Python source: {exc}") from None
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(path), *argv]
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        exec(code, namespace)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise UsageError(f"{path} exited with status {exc.code}; it must finish to be "
                             "inspected") from None
    except Exception as exc:  # the script's own error, not trainguard's: show it, exit 2
        traceback.print_exc()
        raise UsageError(f"{path} raised {type(exc).__name__}: {exc}; fix the script (traceback "
                         "above) so that it finishes") from None
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
    return namespace


def _pick_tensor(namespace: dict[str, Any], name: str, path: Path) -> Any:
    import torch

    if name not in namespace:
        tensors = sorted(k for k, v in namespace.items() if isinstance(v, torch.Tensor)
                         and v.grad_fn is not None)
        raise UsageError(f"--tensor {name}: {path} has no global variable {name!r} at exit; "
                         f"tensors with a graph there: {', '.join(tensors) or 'none'}")
    value = namespace[name]
    if not isinstance(value, torch.Tensor):
        raise UsageError(f"--tensor {name}: {path}'s {name!r} is a {type(value).__name__}, "
                         "not a tensor")
    return value


def _pick_model(namespace: dict[str, Any], name: str | None, path: Path) -> Any:
    import torch

    modules = {k: v for k, v in namespace.items() if isinstance(v, torch.nn.Module)
               and not k.startswith("_")}
    if name is not None:
        if name not in modules:
            raise UsageError(f"--model {name}: {path} has no global nn.Module {name!r}; "
                             f"modules there: {', '.join(sorted(modules)) or 'none'}")
        return modules[name]
    if len(modules) == 1:
        return next(iter(modules.values()))
    # Several modules: name parameters "<global>.<parameter>"; skip modules held by another.
    inner = {id(m) for v in modules.values() for m in list(v.modules())[1:]}
    top = {k: v for k, v in modules.items() if id(v) not in inner}
    if len(top) == 1:
        return next(iter(top.values()))
    return torch.nn.ModuleDict(top) if top else None

