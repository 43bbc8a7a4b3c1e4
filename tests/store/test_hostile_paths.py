"""Issue 17, finding 6: path templates match in linear time.

The old template was a regex of lazy ``[^/]+?`` groups: a name with many
separators and no match took time growing as a power of its length (68 s on
251 bytes). ``PathTemplate`` splits with one ``str.find`` per literal.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys

from pyproflab.store.ingest import compile_template

TEMPLATE = "{service}-{version}-{instance}-{type}-{time}-{seq}.pb.gz"


def _regex(template: str) -> re.Pattern[str]:
    """The old compilation (no repeated fields), as the reference for what matches."""
    out, pos = [], 0
    for m in re.finditer(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template):
        out.append(re.escape(template[pos : m.start()]))
        out.append(f"(?P<{m.group(1)}>[^/]+?)")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile(r"(?:^|/)" + "".join(out) + r"$")


def test_a_251_byte_name_of_separators_matches_at_once() -> None:
    code = (
        "from pyproflab.store.ingest import compile_template as c\n"
        f"rx = c({TEMPLATE!r})\n"
        "assert rx.search('-' * 251) is None\n"
        "assert rx.search('/x/' + '-' * 245 + '.pb.gz').groupdict()['seq'] == '-' * 235\n"
    )
    # The regex took hours on this; bounded here so the old code fails, not hangs.
    done = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_matches_what_the_lazy_regex_matched() -> None:
    rng = random.Random(17)
    templates = [
        TEMPLATE,
        "{service}/{version}/{type}-{time}.pb.gz",
        "{a}{b}.x",
        "{a}-{b}",
        "pre-{a}.{b}",
        "{a}/x-{b}-",
        "{a}",
        "/{a}-{b}",
    ]
    alphabet = "a-./x"
    for template in templates:
        ours, ref = compile_template(template), _regex(template)
        for _ in range(3000):
            name = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
            if rng.random() < 0.3:
                name += rng.choice([".pb.gz", ".x", "-"])
            m, r = ours.search(name), ref.search(name)
            assert (m is None) == (r is None), (template, name)
            if m is not None:
                assert m.groupdict() == r.groupdict(), (template, name)


def test_a_repeated_field_must_match_the_same_text() -> None:
    rx = compile_template("{s}/{s}.pb")
    assert rx.search("x/x.pb").groupdict() == {"s": "x"}
    assert rx.search("x/y.pb") is None
