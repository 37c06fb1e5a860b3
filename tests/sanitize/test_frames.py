"""frames.py: where a finding happened, found without hashing code objects on the hot path."""

from __future__ import annotations

import sys
import types

from trainguard.sanitize.core import frames


class _CountsHashes:
    """A constant whose hash is counted: hashing a code object hashes its constants."""

    calls = 0

    def __hash__(self) -> int:
        type(self).calls += 1
        return 7

    def __eq__(self, other: object) -> bool:
        return other is self


def _frame_of_code_with_counted_constant() -> types.FrameType:
    def body():
        return sys._getframe()

    code = body.__code__
    code = code.replace(co_consts=code.co_consts + (_CountsHashes(),))
    return types.FunctionType(code, {"sys": sys})()


def test_look_ups_never_hash_the_code_object():
    # A training loop at module level runs in the script's module code, whose constants hold every
    # function of the script: hashing it on each look-up cost ~20 us per call for a 700-line file.
    frame = _frame_of_code_with_counted_constant()
    assert hash(frame.f_code) and _CountsHashes.calls == 1  # the probe works
    _CountsHashes.calls = 0
    for _ in range(3):
        assert frames.is_user_code(frame.f_code) is True
        assert frames.user_location(frame) == (__file__, frame.f_lineno, frames.frame_location(frame)[2])
        assert frames.user_frame(frame) is frame
    assert _CountsHashes.calls == 0


def test_a_library_frame_is_skipped_for_the_user_frame_above_it():
    import torch

    seen = []

    def user_caller():
        # the probe's forward runs under Module._call_impl (torch); the user frame is this one
        class Probe(torch.nn.Module):
            def forward(self, x):
                seen.append(frames.user_location(sys._getframe(1)))  # Module._call_impl's frame
                return x

        Probe()(torch.zeros(1)); line = sys._getframe().f_lineno  # noqa: E702
        return line

    line = user_caller()
    assert seen[0][0] == __file__ and seen[0][1] == line


def test_every_file_of_trainguard_is_trainguard_not_user_code():
    # The loop, the integrations and the notebook support call the user's model: their lines must
    # never be taken for the user's (a finding there would point inside trainguard).
    import trainguard
    import trainguard.integrations.lightning as lightning_integration
    import trainguard.loop as loop

    for module in (trainguard, lightning_integration, loop, frames):
        assert frames.is_trainguard_file(module.__file__), module.__file__
        assert not frames.is_user_file(module.__file__), module.__file__
    assert frames.is_user_file(__file__)
