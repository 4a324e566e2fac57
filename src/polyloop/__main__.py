# SPDX-License-Identifier: Apache-2.0
"""``python -m polyloop``: the same as the ``polyloop`` command."""
from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
