"""``astutil.is_main_guard``: the one test of ``if __name__ == "__main__":`` the rules share."""

import ast

import pytest

from trainguard.lint.astutil import is_main_guard


@pytest.mark.parametrize("source, expected", [
    ('if __name__ == "__main__":\n    pass', True),
    ("if '__main__' == __name__:\n    pass", True),
    ('if __name__ != "__main__":\n    pass', False),
    ('if __name__ == "__main__" == x:\n    pass', False),
    ('if name == "__main__":\n    pass', False),
    ('if __name__ == "main":\n    pass', False),
    ('if "__main__" in sys.argv:\n    pass', False),
    ('while __name__ == "__main__":\n    pass', False),
])
def test_is_main_guard(source: str, expected: bool) -> None:
    assert is_main_guard(ast.parse(source).body[0]) is expected
