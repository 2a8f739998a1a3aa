"""The stage engine (Stage, executors) and the pretraining-corpus stages and pipelines."""

from .stage import Filter, GlobalStage, Mapper, NoConfig, Scorer, Stage, StageResult, TaskMap

__all__ = ["Filter", "GlobalStage", "Mapper", "NoConfig", "Scorer", "Stage", "StageResult", "TaskMap"]
