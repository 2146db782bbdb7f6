"""The `rlcfg` command line with every command registered: rlcfg.cli.base's app, after each command's module has
put its command on it, in the order `--help` lists them. The heavy imports of `run` stay inside its command."""

from __future__ import annotations

import rlcfg.cli.validate  # noqa: F401
import rlcfg.cli.plan  # noqa: F401
import rlcfg.cli.run  # noqa: F401
import rlcfg.cli.docs  # noqa: F401
import rlcfg.cli.schema  # noqa: F401
import rlcfg.cli.convert  # noqa: F401
import rlcfg.cli.keys  # noqa: F401
from rlcfg.cli.base import app  # noqa: F401
