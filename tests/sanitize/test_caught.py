"""core/caught.py: errors held from their failure to a claim (the run dies of one) or the end."""

from trainguard.sanitize.core.caught import Caught


def test_held_errors_are_claimed_once_or_drained_in_order_up_to_the_limit():
    caught = Caught(2)
    a, b, c = ValueError("a"), RuntimeError("b"), RuntimeError("c")
    caught.hold(a, "pa")
    caught.hold(b, "pb")
    assert caught.full
    caught.hold(c, "pc")  # past the limit: not kept
    assert caught.get(c) is None
    caught.hold(a, "pa2")  # one already held is replaced
    assert caught.get(a) == "pa2"
    assert caught.claim(b) == "pb" and caught.claim(b) is None
    assert caught.drain() == ["pa2"] and caught.drain() == []

