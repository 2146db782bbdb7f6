#!/usr/bin/env bash
# rlcfg's GPU acceptance checks (bench/gpu_acceptance.py; its docstring says what each one does): one line per
# check, a summary, exit 1 when a check failed. Arguments go to the module (--list, --only NAME,..., --verbose).
# PYTHON picks the interpreter; by default the checkout's .venv when it has one, else python3.
# The module keeps to a budget of its own (450 s); the timeout is the backstop that ends it at 8 minutes.
set -u
bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$bench/../.venv/bin/python" ]; then PYTHON="$bench/../.venv/bin/python"; else PYTHON=python3; fi
fi
exec timeout --kill-after=20 480 "$PYTHON" "$bench/gpu_acceptance.py" "$@"
