"""What a checkpoint's pickle calls, read without unpickling (``core/pickled.py``): a resume
checkpoint's usual contents call nothing that runs code; a payload calling a builtin (even
``print``) or ``os`` does (ecmwf/anemoi-core#1416's ``os.system`` proof of concept)."""

from __future__ import annotations

import argparse
import os

import torch

from trainguard.sanitize.core.pickled import code_calls, program_calls, read_pickle


class _Printing:
    def __reduce__(self):
        return (print, ("loaded",))


def _plugin(name):
    return {"plugin": name}


class _CallsPlugin:
    def __reduce__(self):
        return (_plugin, ("run at load",))


class _Config:
    def __init__(self):
        self.width = 8


class _System:
    def __reduce__(self):
        return (os.getcwd, ())


def _saved(tmp_path, obj, name):
    path = tmp_path / name
    torch.save(obj, path)
    return str(path)


def test_a_resume_checkpoint_calls_nothing_that_runs_code(tmp_path):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "args": argparse.Namespace(lr=1e-3), "rng": torch.get_rng_state(),
             "seen": {1, 2}, "window": slice(0, 4)}
    assert code_calls(read_pickle(_saved(tmp_path, state, "resume.pt"))) == []


def test_a_payload_calling_a_builtin_or_os_is_named(tmp_path):
    printing = _saved(tmp_path, {"w": torch.ones(2), "m": _Printing()}, "a.pt")
    assert code_calls(read_pickle(printing)) == ["builtins.print"]
    system = _saved(tmp_path, {"m": _System()}, "b.pt")
    assert code_calls(read_pickle(system)) in (["posix.getcwd"], ["nt.getcwd"], ["os.getcwd"])


def test_a_file_that_is_no_archive_names_nothing(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text("not a checkpoint")
    assert code_calls(read_pickle(str(path))) == []


def test_a_call_of_a_program_function_is_named(tmp_path):
    # a __reduce__ that calls a function of the loading program runs it at load
    path = _saved(tmp_path, {"w": torch.ones(2), "meta": _CallsPlugin()}, "c.pt")
    assert program_calls(read_pickle(path)) == [f"{__name__}._plugin"]


def test_program_classes_and_function_references_are_not_calls(tmp_path):
    # an instance of a program class is rebuilt, a function stored as a value is only named
    state = {"config": _Config(), "hook": _plugin, "again": _plugin, "opt": argparse.Namespace()}
    assert program_calls(read_pickle(_saved(tmp_path, state, "d.pt"))) == []
