# SPDX-License-Identifier: Apache-2.0
"""L4: isl AST -> the small loop AST (For/If/Block/Store/Barrier) with loop kinds."""
