"""The Fill-mask tab's result as text (``explorer.fill_mask.results``): what it prints shows as typed."""
from __future__ import annotations

from explorer.formatting import code, plain_markdown


def test_joint_markdown_escapes_what_it_prints() -> None:
    assert plain_markdown("a *b* [c](d) <i>") == r"a \*b\* \[c\]\(d\) \<i\>"
    assert code("a`b") == "`` a`b ``" and code("ab") == "`ab`" and code("<mask>") == "`<mask>`"
