"""The Fill-mask tab's result as text (``explorer.fill_mask.results``): what it prints shows as typed."""
from __future__ import annotations

from explorer.fill_mask import results


def test_joint_markdown_escapes_what_it_prints() -> None:
    assert results.plain_markdown("a *b* [c](d) <i>") == r"a \*b\* \[c\]\(d\) \<i\>"
    assert results._code("a`b") == "`` a`b ``" and results._code("ab") == "`ab`"
