import gc

# The cyclic collector stays off while the CLI's imports build its schemas; `main` turns it back on for the
# commands that run for long (see rlcfg.cli.main).
gc.disable()

from rlcfg.cli import console  # noqa: E402

console()
