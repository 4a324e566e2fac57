# SPDX-License-Identifier: Apache-2.0
"""L8: pictures of iteration spaces, dependences and schedules (needs the ``viz`` extra:
``pip install 'polyloop[viz]'``; matplotlib is imported only when something is drawn)."""
from .iteration_space import plot_iteration_space, plot_schedule
from .tuning import plot_tuning

__all__ = ["plot_iteration_space", "plot_schedule", "plot_tuning"]
