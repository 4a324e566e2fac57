# SPDX-License-Identifier: Apache-2.0
"""polyloop: a compiler for loop and tensor programs with exact polyhedral legality checks."""
