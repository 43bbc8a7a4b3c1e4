"""``python -m pyproflab``: the same CLI as the ``pyproflab`` script."""

from pyproflab.cli import run

run()
