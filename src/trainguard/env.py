"""``trainguard env``: does this machine's torch, CUDA runtime, NVIDIA driver and GPU fit together?

Facts relied on:

- PyTorch's CUDA wheels bundle the CUDA runtime and libraries; the machine needs only an NVIDIA
  driver new enough for that runtime (https://pytorch.org/get-started/locally/).
  ``torch.version.cuda`` is the runtime the build was compiled with (None on CPU and ROCm builds),
  ``torch.version.hip`` the ROCm version (https://pytorch.org/docs/stable/notes/hip.html).
- The minimum driver for each CUDA release: NVIDIA CUDA Toolkit Release Notes, Table 3 "CUDA
  Toolkit and Corresponding Driver Versions"; from CUDA 11 on, a driver of the same major family
  runs later minor releases with a limited feature set ("minor version compatibility"), minimum
  drivers in Table 2 there and in https://docs.nvidia.com/deploy/cuda-compatibility/ (13.x: >= 580,
  12.x: >= 525, 11.x: >= 450). Under minor version compatibility PTX cannot be JIT-compiled if it
  was produced by a newer toolkit than the driver.
  https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
- ``torch.cuda.get_arch_list()`` lists the architectures compiled in: ``sm_XY`` are binaries,
  ``compute_XY`` is PTX (https://pytorch.org/docs/stable/generated/torch.cuda.get_arch_list.html).
  A binary for ``sm_XY`` runs on GPUs of capability X.Z with Z >= Y (same major); PTX for
  ``compute_XY`` is JIT-compiled for any capability >= X.Y; arch-specific ``sm_90a`` binaries run
  only on 9.0 (CUDA C++ Programming Guide, "Binary Compatibility" and "PTX Compatibility").
- Determinism flags: ``torch.are_deterministic_algorithms_enabled()``,
  ``torch.backends.cudnn.deterministic``/``benchmark``
  (https://pytorch.org/docs/stable/notes/randomness.html).

Everything that touches the machine is injectable (``read_driver``, the ``facts`` passed to
:func:`check`), so the fit and misfit cases can be tested anywhere.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

__all__ = ["DRIVER_TABLE", "MINOR_COMPAT", "EnvFacts", "GPU", "Check", "EnvReport", "collect",
           "check", "environment", "read_driver_version"]

# CUDA release -> minimum driver (Linux x86_64, Windows), for the release's GA version.
# Source: NVIDIA CUDA Toolkit Release Notes, Table 3 "CUDA Toolkit and Corresponding Driver
# Versions", https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
# None: no Windows row trainguard could confirm (from 13.0 the Windows toolkit no longer ships a
# driver); such a machine is judged by the minor-version-compatibility floor alone.
DRIVER_TABLE: dict[str, tuple[str, str | None]] = {
    "13.0": ("580.65.06", None),
    "12.9": ("575.51.03", "576.02"),
    "12.8": ("570.26", "570.65"),
    "12.6": ("560.28.03", "560.76"),
    "12.5": ("555.42.02", "555.85"),
    "12.4": ("550.54.14", "551.61"),
    "12.3": ("545.23.06", "545.84"),
    "12.2": ("535.54.03", "536.25"),
    "12.1": ("530.30.02", "531.14"),
    "12.0": ("525.60.13", "527.41"),
    "11.8": ("520.61.05", "520.06"),
    "11.7": ("515.43.04", "516.01"),
    "11.6": ("510.39.01", "511.23"),
    "11.5": ("495.29.05", "496.04"),
    "11.4": ("470.42.01", "471.11"),
    "11.3": ("465.19.01", "465.89"),
    "11.2": ("460.27.03", "460.82"),
    "11.1": ("455.23", "456.38"),
    "11.0": ("450.51.05", "451.48"),
    "10.2": ("440.33", "441.22"),
}
# CUDA major -> minimum driver for minor version compatibility (Linux, Windows).
# Source: same release notes, Table 2, and https://docs.nvidia.com/deploy/cuda-compatibility/
# (11.x: CUDA 11.0 shipped with an older driver; minor version compatibility across 11.x needs
# 450.80.02 / 452.39, the table's footnote).
MINOR_COMPAT: dict[int, tuple[str, str | None]] = {
    13: ("580", "580"),
    12: ("525.60.13", "527.41"),
    11: ("450.80.02", "452.39"),
}
RELEASE_NOTES = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"
GET_STARTED = "https://pytorch.org/get-started/locally/"

Status = Literal["ok", "info", "warn", "fail"]


@dataclass
class GPU:
    """One visible GPU: ``total_memory_bytes`` in bytes, ``capability`` as (major, minor)."""

    index: int
    name: str
    total_memory_bytes: int
    capability: tuple[int, int]


@dataclass
class EnvFacts:
    """What :func:`collect` read from the machine (build it by hand to test :func:`check`)."""

    torch_version: str
    cuda_build: str | None = None  # torch.version.cuda
    hip_build: str | None = None  # torch.version.hip
    cudnn_version: int | None = None
    driver_version: str | None = None
    driver_source: str | None = None  # "nvidia-smi" or "/proc/driver/nvidia/version"
    os: Literal["linux", "windows", "darwin", "other"] = "linux"
    cuda_available: bool = False
    gpus: list[GPU] = field(default_factory=list)
    arch_list: list[str] = field(default_factory=list)
    threads: int = 1
    interop_threads: int = 1
    cpus: int | None = None  # os.cpu_count()
    deterministic_algorithms: bool = False
    deterministic_warn_only: bool = False
    cudnn_deterministic: bool = False
    cudnn_benchmark: bool = False
    python: str = field(default_factory=lambda: platform.python_version())


@dataclass
class Check:
    """One line of the report: ``status`` is ok/info/warn/fail; ``fix`` says what to do."""

    name: str
    status: Status
    message: str
    fix: str = ""


@dataclass
class EnvReport:
    """``trainguard env``: the facts, one :class:`Check` per question, and a verdict."""

    facts: EnvFacts
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    @property
    def verdict(self) -> str:
        for status in ("fail", "warn"):
            bad = [c for c in self.checks if c.status == status]
            if bad:
                word = "DOES NOT FIT" if status == "fail" else "WORKS WITH CAVEATS"
                return f"{word}: {bad[0].message}; {bad[0].fix}"
        return "OK: this torch build, driver and hardware fit together"

    def to_dict(self) -> dict[str, Any]:
        return {"facts": asdict(self.facts), "checks": [asdict(c) for c in self.checks],
                "ok": self.ok, "verdict": self.verdict, "driver_table_source": RELEASE_NOTES}

    def __str__(self) -> str:
        mark = {"ok": "ok  ", "info": "    ", "warn": "WARN", "fail": "FAIL"}
        lines = [f"{mark[c.status]}  {c.name:<13} {c.message}"
                 + (f"\n{'':19}fix: {c.fix}" if c.fix and c.status in ("warn", "fail") else "")
                 for c in self.checks]
        return "\n".join(lines + [f"verdict: {self.verdict}"])


def read_driver_version(
    *,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    which: Callable[[str], str | None] = shutil.which,
    proc_path: str | os.PathLike[str] = "/proc/driver/nvidia/version",
) -> tuple[str | None, str | None]:
    """The NVIDIA driver version and where it was read, or ``(None, None)`` when there is none.

    Tries ``nvidia-smi --query-gpu=driver_version --format=csv,noheader``, then the kernel module's
    ``/proc/driver/nvidia/version`` ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14 ...").
    Never raises: a missing or hanging ``nvidia-smi`` is treated as no driver.
    """
    exe = which("nvidia-smi")
    if exe:
        try:
            done = run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                       capture_output=True, text=True, timeout=10)
            match = re.search(r"\d+\.\d+(?:\.\d+)?", done.stdout or "")
            if done.returncode == 0 and match:
                return match.group(0), "nvidia-smi"
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        text = Path(proc_path).read_text()
    except OSError:
        return None, None
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    return (match.group(1), str(proc_path)) if match else (None, None)


def collect(*, read_driver: Callable[[], tuple[str | None, str | None]] | None = None
            ) -> EnvFacts:
    """Read the facts from this machine (imports torch; works with no GPU and no driver).

    Args:
        read_driver: returns ``(driver_version, source)``; default :func:`read_driver_version`.
    """
    import torch

    driver, source = (read_driver or read_driver_version)()
    system = {"Linux": "linux", "Windows": "windows", "Darwin": "darwin"}.get(platform.system(),
                                                                              "other")
    facts = EnvFacts(
        torch_version=torch.__version__, cuda_build=torch.version.cuda,
        hip_build=getattr(torch.version, "hip", None), driver_version=driver,
        driver_source=source, os=system, threads=torch.get_num_threads(),
        interop_threads=torch.get_num_interop_threads(), cpus=os.cpu_count(),
        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
        deterministic_warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
        cudnn_deterministic=bool(torch.backends.cudnn.deterministic),
        cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
    )
    try:
        facts.cudnn_version = torch.backends.cudnn.version()
    except Exception:  # a build without cuDNN
        facts.cudnn_version = None
    facts.cuda_available = torch.cuda.is_available()
    if facts.cuda_available:
        facts.arch_list = list(torch.cuda.get_arch_list())
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            facts.gpus.append(GPU(i, props.name, int(props.total_memory),
                                  (props.major, props.minor)))
    return facts


def environment(*, read_driver: Callable[[], tuple[str | None, str | None]] | None = None
                ) -> EnvReport:
    """Collect and check this machine.

    Example::

        from trainguard.env import environment
        print(environment())   # or, in a shell: trainguard env --format json
    """
    return check(collect(read_driver=read_driver))


def check(facts: EnvFacts) -> EnvReport:
    """Judge ``facts``: build, driver fit, GPU architectures, cuDNN, threads, determinism."""
    checks = [_build(facts), _driver(facts), *_gpus(facts)]
    if facts.cudnn_version is not None:
        checks.append(Check("cudnn", "info", f"cuDNN {_cudnn(facts.cudnn_version)}"))
    checks.append(Check("threads", "info", f"{facts.threads} intra-op, {facts.interop_threads} "
                        f"inter-op (torch.get_num_threads/get_num_interop_threads), "
                        f"{f'{facts.cpus} CPUs' if facts.cpus else 'CPU count unknown'}"))
    checks.append(_determinism(facts))
    return EnvReport(facts, checks)


def _build(f: EnvFacts) -> Check:
    if f.hip_build:
        return Check("torch", "info", f"torch {f.torch_version}, ROCm {f.hip_build} build")
    if f.cuda_build:
        return Check("torch", "info", f"torch {f.torch_version}, CUDA {f.cuda_build} build "
                     "(bundles its CUDA runtime; needs only a new enough NVIDIA driver)")
    return Check("torch", "info", f"torch {f.torch_version}, CPU-only build, Python {f.python}")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _driver(f: EnvFacts) -> Check:
    if not f.cuda_build:
        if f.driver_version and not f.hip_build:
            return Check("driver", "warn", f"NVIDIA driver {f.driver_version} found but this torch "
                         "build has no CUDA support, so the GPU is unused",
                         f"install a CUDA build of torch: pick one at {GET_STARTED}")
        return Check("driver", "info", f"NVIDIA driver {f.driver_version or 'not found'} "
                     "(not needed by this build)")
    if f.driver_version is None:
        return Check("driver", "warn", f"no NVIDIA driver found (no nvidia-smi, no "
                     f"/proc/driver/nvidia/version): this CUDA {f.cuda_build} build runs on CPU only",
                     "install the NVIDIA driver for your GPU, or ignore this on a CPU-only machine")
    runtime = ".".join(f.cuda_build.split(".")[:2])
    col = 1 if f.os == "windows" else 0
    have = _version(f.driver_version)
    full = (DRIVER_TABLE.get(runtime) or (None, None))[col]
    compat = (MINOR_COMPAT.get(_version(runtime)[0]) or (None, None))[col]
    source = f"(driver {f.driver_version} from {f.driver_source})"
    if full and have >= _version(full):
        return Check("driver", "ok", f"driver {f.driver_version} >= {full}, the minimum for "
                     f"CUDA {runtime} (release notes Table 3) {source}")
    if compat and have >= _version(compat):
        if not full:
            return Check("driver", "info", f"CUDA {runtime} is not in trainguard's driver table "
                         f"for {f.os}; driver {f.driver_version} >= {compat} runs CUDA "
                         f"{runtime.split('.')[0]}.x at least under minor version compatibility "
                         f"{source}")
        return Check("driver", "warn", f"driver {f.driver_version} is older than CUDA {runtime} "
                     f"needs (>= {full}) but runs it under CUDA minor version compatibility "
                     f"(>= {compat}): PTX JIT of newer-toolkit code is unavailable",
                     f"upgrade the NVIDIA driver to >= {full}")
    if not full and not compat:
        return Check("driver", "warn", f"CUDA {runtime} is not in trainguard's driver table; "
                     f"cannot judge driver {f.driver_version}", f"see {RELEASE_NOTES}")
    needs = f">= {full or compat}"
    if full and compat:
        needs += f"; >= {compat} at least under minor version compatibility"
    return Check("driver", "fail", f"driver {f.driver_version} is too old for this torch's CUDA "
                 f"{runtime} (needs {needs}) {source}",
                 f"upgrade the NVIDIA driver, or install a torch build for an older CUDA that this "
                 f"driver supports ({GET_STARTED})")


def _supports(cap: tuple[int, int], arch_list: list[str]) -> tuple[str, str | None]:
    """("binary"|"ptx"|"none", the arch entry that matched)."""
    major, minor = cap
    binaries = []
    for arch in arch_list:
        m = re.fullmatch(r"sm_(\d+?)(\d)([a-z]?)", arch)
        if m and int(m.group(1)) == major and (
                int(m.group(2)) == minor if m.group(3) else int(m.group(2)) <= minor):
            binaries.append((int(m.group(2)), arch))
    if binaries:
        return "binary", max(binaries)[1]  # the closest one
    for arch in arch_list:
        m = re.fullmatch(r"compute_(\d+?)(\d)", arch)
        if m and (int(m.group(1)), int(m.group(2))) <= cap:
            return "ptx", arch
    return "none", None


def _gpus(f: EnvFacts) -> list[Check]:
    if not f.cuda_build and not f.hip_build:
        return []
    if not f.cuda_available:
        status: Status = "fail" if f.driver_version and f.cuda_build else "info"
        return [Check("gpu", status, "torch.cuda.is_available() is False"
                      + (f" although driver {f.driver_version} is installed" if f.driver_version
                         else ""), "check CUDA_VISIBLE_DEVICES and that the driver matches the "
                      "kernel module (nvidia-smi must run)")]
    out = []
    for gpu in f.gpus:
        cap = f"{gpu.capability[0]}.{gpu.capability[1]}"
        desc = f"GPU {gpu.index} {gpu.name}, {gpu.total_memory_bytes / 2**30:.1f} GiB, capability {cap}"
        if f.hip_build:
            out.append(Check("gpu", "info", desc))
            continue
        how, arch = _supports(gpu.capability, f.arch_list)
        if how == "binary":
            out.append(Check("gpu", "ok", f"{desc}: runs {arch} binaries of this build"))
        elif how == "ptx":
            out.append(Check("gpu", "warn", f"{desc}: no binary for it; kernels are JIT-compiled "
                             f"from {arch} PTX (slow first start, needs a new enough driver)",
                             f"install a torch build whose get_arch_list() has sm_"
                             f"{gpu.capability[0]}{gpu.capability[1]}"))
        else:
            out.append(Check("gpu", "fail", f"{desc}: this build has no kernels for it "
                             f"(get_arch_list: {' '.join(f.arch_list) or 'empty'})",
                             f"install a torch build compiled for sm_{gpu.capability[0]}"
                             f"{gpu.capability[1]} ({GET_STARTED})"))
    return out


def _determinism(f: EnvFacts) -> Check:
    text = (f"use_deterministic_algorithms={f.deterministic_algorithms}"
            f"{' (warn_only)' if f.deterministic_warn_only else ''}, "
            f"cudnn.deterministic={f.cudnn_deterministic}, cudnn.benchmark={f.cudnn_benchmark}")
    if f.cudnn_benchmark and (f.deterministic_algorithms or f.cudnn_deterministic):
        return Check("determinism", "warn", text + ": benchmark mode picks algorithms by timing, "
                     "which can differ between runs", "set torch.backends.cudnn.benchmark = False "
                     "for reproducible runs (https://pytorch.org/docs/stable/notes/randomness.html)")
    return Check("determinism", "info", text)


def _cudnn(version: int) -> str:
    # torch.backends.cudnn.version() is CUDNN_VERSION: major*1000 + minor*100 + patch up to
    # cuDNN 8 (8902 -> 8.9.2), major*10000 + minor*100 + patch from cuDNN 9 (90100 -> 9.1.0).
    if version >= 10000:
        return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
    return f"{version // 1000}.{version // 100 % 10}.{version % 100}"



def register(subparsers: Any) -> None:
    """Add ``trainguard env [--format text|json]`` (exit 0 when everything fits, 1 otherwise)."""
    parser = subparsers.add_parser(
        "env", help="check that torch, the CUDA runtime, the NVIDIA driver and the GPUs fit",
        description="Report the torch build, CUDA runtime, NVIDIA driver (and whether it is new "
        "enough), cuDNN, GPUs vs the build's compiled architectures, threads and determinism "
        "flags, with a verdict. Exit 0 when everything fits, 1 when something does not.")
    parser.add_argument("--format", choices=["text", "json"], default="text",
                        help="text: one line per check and a verdict; json: the facts and checks "
                        "as data")
    parser.set_defaults(func=run)


def run(args: Any) -> int:
    import json

    report = environment()
    print(json.dumps(report.to_dict(), indent=2) if args.format == "json" else report)
    return 0 if report.ok else 1
