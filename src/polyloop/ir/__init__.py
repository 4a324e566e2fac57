# SPDX-License-Identifier: Apache-2.0
"""L1: the intermediate representation (expressions, buffers, statements, programs)."""
