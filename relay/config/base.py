"""What every config model shares: unknown keys refused; `true` or `false` is no number (`max_deliveries: true`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


class ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_flag_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            annotation = str(cls.model_fields[info.field_name].annotation)
            if "bool" not in annotation and ("int" in annotation or "float" in annotation):
                raise ValueError(f"{str(value).lower()} is not a number")
        return value
