"""Pipelines defined in TOML files: topics, stages, the DAG, and the runner."""

from .definition import PipelineDefinition, PipelineDefinitionError, StageDefinition, TopicDefinition, load_pipeline

__all__ = ["PipelineDefinition", "PipelineDefinitionError", "StageDefinition", "TopicDefinition", "load_pipeline"]
