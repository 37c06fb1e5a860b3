"""trainguard env: faked driver, CUDA and GPU facts for the fit and misfit cases."""

from __future__ import annotations

import json
import subprocess

import pytest

from trainguard import cli, env
from trainguard.env import GPU, EnvFacts, check, read_driver_version


def cuda_facts(**changes) -> EnvFacts:
    facts = EnvFacts(torch_version="2.6.0+cu124", cuda_build="12.4", cudnn_version=90100,
                     driver_version="550.54.14", driver_source="nvidia-smi", os="linux",
                     cuda_available=True, arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80",
                                                     "sm_86", "sm_90"],
                     gpus=[GPU(0, "NVIDIA A100-SXM4-40GB", 40 * 2**30, (8, 0))])
    for key, value in changes.items():
        setattr(facts, key, value)
    return facts


def status(report: env.EnvReport, name: str) -> list[str]:
    return [c.status for c in report.checks if c.name == name]


@pytest.mark.parametrize("driver, os_name, expected, words", [
    ("550.54.14", "linux", "ok", ">= 550.54.14, the minimum for CUDA 12.4"),
    ("560.35.03", "linux", "ok", ">= 550.54.14"),
    ("535.104.05", "linux", "warn", "minor version compatibility (>= 525.60.13)"),
    ("470.82.01", "linux", "fail", "too old for this torch's CUDA 12.4 (needs >= 550.54.14"),
    ("551.61", "windows", "ok", ">= 551.61"),
    ("527.00", "windows", "fail", "too old"),
])
def test_driver_fit_and_misfit(driver, os_name, expected, words):
    report = check(cuda_facts(driver_version=driver, os=os_name))
    [driver_check] = [c for c in report.checks if c.name == "driver"]
    assert driver_check.status == expected
    assert words in driver_check.message
    assert report.ok == (expected != "fail")
    if expected == "fail":
        assert report.verdict.startswith("DOES NOT FIT: driver") and "upgrade the NVIDIA driver" \
            in report.verdict


def test_everything_fits():
    report = check(cuda_facts())
    assert report.ok and report.verdict.startswith("OK")
    assert status(report, "gpu") == ["ok"]
    assert "A100-SXM4-40GB, 40.0 GiB, capability 8.0: runs sm_80 binaries" in str(report)
    assert "cuDNN 9.1.0" in str(report)


@pytest.mark.parametrize("capability, arch_list, expected, words", [
    ((8, 9), ["sm_80", "sm_86"], "ok", "runs sm_86 binaries"),  # same major, lower minor
    ((9, 0), ["sm_80", "sm_90a"], "ok", "runs sm_90a binaries"),
    ((9, 1), ["sm_80", "sm_90a"], "fail", "no kernels"),  # arch-specific: 9.0 only
    ((12, 0), ["sm_80", "sm_90", "compute_90"], "warn", "JIT-compiled from compute_90 PTX"),
    ((12, 0), ["sm_50", "sm_60", "sm_70", "sm_80", "sm_90"], "fail", "no kernels for it"),
    ((3, 7), ["sm_50", "sm_60"], "fail", "no kernels for it"),  # too old for the build
])
def test_gpu_against_compiled_architectures(capability, arch_list, expected, words):
    gpu = GPU(0, "Some GPU", 16 * 2**30, capability)
    report = check(cuda_facts(gpus=[gpu], arch_list=arch_list))
    [gpu_check] = [c for c in report.checks if c.name == "gpu"]
    assert gpu_check.status == expected and words in gpu_check.message
    if expected == "fail":
        assert f"sm_{capability[0]}{capability[1]}" in gpu_check.fix


def test_no_gpu_no_driver_cpu_build():
    facts = EnvFacts(torch_version="2.6.0+cpu")
    report = check(facts)
    assert report.ok and report.verdict.startswith("OK")
    assert status(report, "gpu") == []


def test_cpu_build_on_a_gpu_machine_warns():
    report = check(EnvFacts(torch_version="2.6.0+cpu", driver_version="550.54.14"))
    assert status(report, "driver") == ["warn"]
    assert "WORKS WITH CAVEATS: NVIDIA driver 550.54.14 found but this torch build has no CUDA" \
        in report.verdict


def test_cuda_build_without_driver_or_unavailable():
    no_driver = check(cuda_facts(driver_version=None, cuda_available=False, gpus=[]))
    assert status(no_driver, "driver") == ["warn"] and status(no_driver, "gpu") == ["info"]
    broken = check(cuda_facts(cuda_available=False, gpus=[]))
    assert status(broken, "gpu") == ["fail"] and "is False although driver" in broken.verdict


def test_determinism_flags():
    report = check(cuda_facts(cudnn_benchmark=True, deterministic_algorithms=True))
    assert status(report, "determinism") == ["warn"]
    assert status(check(cuda_facts(cudnn_benchmark=True)), "determinism") == ["info"]


def test_read_driver_from_nvidia_smi():
    def run(cmd, **kwargs):
        assert cmd[1:] == ["--query-gpu=driver_version", "--format=csv,noheader"]
        return subprocess.CompletedProcess(cmd, 0, stdout="550.54.14\n550.54.14\n", stderr="")

    assert read_driver_version(run=run, which=lambda n: "/usr/bin/nvidia-smi") == \
        ("550.54.14", "nvidia-smi")


def test_read_driver_from_proc_when_nvidia_smi_fails(tmp_path):
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 "
                    "01:15:15 UTC 2023\nGCC version:  gcc version 12.2.0\n")

    def run(cmd, **kwargs):
        raise subprocess.TimeoutExpired(cmd, 10)

    assert read_driver_version(run=run, which=lambda n: "/x/nvidia-smi", proc_path=proc) == \
        ("535.104.05", str(proc))


def test_read_driver_none(tmp_path):
    assert read_driver_version(which=lambda n: None, proc_path=tmp_path / "absent") == (None, None)


def test_collect_on_this_machine_with_a_fake_driver():
    facts = env.collect(read_driver=lambda: ("470.82.01", "fake"))
    assert facts.torch_version and facts.threads >= 1
    assert facts.driver_version == "470.82.01"
    report = check(facts)
    if facts.cuda_build is None:
        assert status(report, "driver") == ["warn"]


def test_every_table_release_has_a_minor_compat_floor_below_it():
    for release, (linux, windows) in env.DRIVER_TABLE.items():
        major = int(release.split(".")[0])
        if major in env.MINOR_COMPAT and release != "11.0":  # 11.0 predates its floor (footnote)
            floor = env.MINOR_COMPAT[major]
            assert env._version(floor[0]) <= env._version(linux), release
            if windows is not None:
                assert env._version(floor[1]) <= env._version(windows), release


def test_env_command_json_and_text(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_SUBCOMMANDS", ["trainguard.env"])
    monkeypatch.setattr(env, "read_driver_version", lambda: (None, None))
    assert cli.main(["env", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["verdict"].startswith("OK")
    assert data["facts"]["driver_version"] is None
    assert data["driver_table_source"].startswith("https://docs.nvidia.com/cuda/")
    assert cli.main(["env"]) == 0
    assert "verdict: OK" in capsys.readouterr().out


@pytest.mark.parametrize("runtime, driver, expected, words", [
    ("13.1", "590.10", "info", "not in trainguard's driver table for linux"),
    ("13.1", "575.51.03", "fail", "needs >= 580"),
    ("14.0", "600.1", "warn", "not in trainguard's driver table"),
])
def test_runtime_newer_than_the_table(runtime, driver, expected, words):
    report = check(cuda_facts(cuda_build=runtime, driver_version=driver))
    [driver_check] = [c for c in report.checks if c.name == "driver"]
    assert driver_check.status == expected and words in driver_check.message


def test_windows_row_missing_falls_back_to_the_minor_compat_floor():
    report = check(cuda_facts(cuda_build="13.0", driver_version="581.57", os="windows"))
    [driver_check] = [c for c in report.checks if c.name == "driver"]
    assert driver_check.status == "info" and report.ok
    assert "not in trainguard's driver table for windows; driver 581.57 >= 580" in \
        driver_check.message
    old = check(cuda_facts(cuda_build="13.0", driver_version="576.02", os="windows"))
    assert status(old, "driver") == ["fail"] and "needs >= 580" in old.verdict


def test_rocm_build_is_not_judged_by_the_nvidia_table():
    facts = EnvFacts(torch_version="2.6.0+rocm6.2", hip_build="6.2.41133", cuda_available=True,
                     gpus=[GPU(0, "AMD Instinct MI250X", 64 * 2**30, (9, 0))])
    report = check(facts)
    assert report.ok and report.verdict.startswith("OK")
    assert "ROCm 6.2.41133 build" in str(report) and "AMD Instinct MI250X, 64.0 GiB" in str(report)
    assert status(check(EnvFacts(torch_version="2.6.0+rocm6.2", hip_build="6.2")), "gpu") == ["info"]
