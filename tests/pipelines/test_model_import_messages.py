"""A pipeline file's model that cannot be found says what is missing, not "not a pydantic model"."""

from __future__ import annotations

import pytest

from minikafka.pipelines.definition import PipelineDefinitionError, load_pipeline
from tests.pipelines.helpers import homelab_copy


def _load(tmp_path, model):
    path = homelab_copy(tmp_path, replace={'model = "schemas.homelab:Scored"': f'model = "{model}"'})
    with pytest.raises(PipelineDefinitionError) as info:
        load_pipeline(path)
    return str(info.value)


def test_a_misspelt_model_name_says_the_module_has_no_such_attribute_and_suggests_the_closest(tmp_path):
    message = _load(tmp_path, "schemas.homelab:Scoredd")
    assert "module schemas.homelab has no attribute 'Scoredd'" in message
    assert "did you mean 'Scored'?" in message
    assert "is not a pydantic model" not in message


def test_a_missing_nested_model_names_its_class(tmp_path):
    message = _load(tmp_path, "schemas.homelab:Scored.Inner")
    assert "schemas.homelab:Scored has no attribute 'Inner'" in message


def test_an_attribute_that_is_not_a_model_is_still_called_not_a_pydantic_model(tmp_path):
    message = _load(tmp_path, "schemas.homelab:BaseModel.model_validate")
    assert "is not a pydantic model" in message
