"""Synthetic data of §3.2: patterns, tasks (Condition 1) and prompts (Definitions 1-2)."""
from .patterns import Patterns, make_patterns, test_outliers
from .prompts import TokenBasis, Prompts, test_prompts, training_prompts
from .tasks import (all_tasks, check_condition_1, cyclic_distance, task_groups, tasks_by_group, training_tasks,
                    unseen_tasks)

__all__ = [
    "Patterns",
    "TokenBasis",
    "Prompts",
    "all_tasks",
    "check_condition_1",
    "cyclic_distance",
    "make_patterns",
    "task_groups",
    "tasks_by_group",
    "test_outliers",
    "test_prompts",
    "training_prompts",
    "training_tasks",
    "unseen_tasks",
]
