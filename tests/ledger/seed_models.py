"""A replica of the seed's Pydantic models (omnibase_infra models/checkpoint, §2.3), used only to
prove file compatibility both ways: what we write loads in the seed, what the seed writes loads in
ours, byte for byte the same YAML."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator


class EnumCheckpointPhase(StrEnum):
    IMPLEMENT = "implement"
    LOCAL_REVIEW = "local_review"
    CREATE_PR = "create_pr"
    PR_RELEASE_READY = "pr_release_ready"
    READY_FOR_MERGE = "ready_for_merge"


_CONFIG = ConfigDict(frozen=True, extra="forbid", from_attributes=True)
Sha = Annotated[str, Field(min_length=7, max_length=40, pattern=r"^[0-9a-f]+$")]


class ModelPhasePayloadImplement(BaseModel):
    model_config = _CONFIG
    phase: Literal["implement"] = "implement"
    branch_name: str = Field(..., min_length=1, max_length=512)
    commit_sha: Sha
    files_changed: tuple[str, ...] = ()


class ModelPhasePayloadLocalReview(BaseModel):
    model_config = _CONFIG
    phase: Literal["local_review"] = "local_review"
    iteration_count: int = Field(..., ge=1)
    issue_fingerprints: tuple[str, ...] = ()
    last_clean_sha: Sha


class ModelPhasePayloadCreatePr(BaseModel):
    model_config = _CONFIG
    phase: Literal["create_pr"] = "create_pr"
    pr_url: str = Field(..., min_length=1)
    pr_number: int = Field(..., ge=1)
    head_sha: Sha


class ModelPhasePayloadPrReleaseReady(BaseModel):
    model_config = _CONFIG
    phase: Literal["pr_release_ready"] = "pr_release_ready"
    last_review_sha: Sha
    issue_fingerprints: tuple[str, ...] = ()


class ModelPhasePayloadReadyForMerge(BaseModel):
    model_config = _CONFIG
    phase: Literal["ready_for_merge"] = "ready_for_merge"
    label_applied_at: datetime

    @field_validator("label_applied_at", mode="after")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("label_applied_at must be timezone-aware (use datetime.now(UTC))")
        return v.astimezone(UTC)


PhasePayload = Annotated[
    Annotated[ModelPhasePayloadImplement, Tag("implement")]
    | Annotated[ModelPhasePayloadLocalReview, Tag("local_review")]
    | Annotated[ModelPhasePayloadCreatePr, Tag("create_pr")]
    | Annotated[ModelPhasePayloadPrReleaseReady, Tag("pr_release_ready")]
    | Annotated[ModelPhasePayloadReadyForMerge, Tag("ready_for_merge")],
    Discriminator("phase"),
]


class ModelCheckpoint(BaseModel):
    model_config = _CONFIG
    schema_version: str = "1.0.0"
    run_id: UUID
    ticket_id: str = Field(..., min_length=1, max_length=64)
    phase: EnumCheckpointPhase
    timestamp_utc: datetime
    repo_commit_map: dict[str, str] = Field(default_factory=dict)
    artifact_paths: tuple[str, ...] = ()
    attempt_number: int = Field(default=1, ge=1)
    phase_payload: PhasePayload

    @field_validator("timestamp_utc", mode="after")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("timestamp_utc must be timezone-aware (use datetime.now(UTC))")
        return v.astimezone(UTC)

    @field_validator("repo_commit_map", mode="after")
    @classmethod
    def _hex(cls, v: dict[str, str]) -> dict[str, str]:
        for key, sha in v.items():
            if not re.fullmatch(r"[0-9a-f]+", sha):
                raise ValueError(f"repo_commit_map[{key!r}] value {sha!r} is not a valid hex commit SHA")
        return v

    @model_validator(mode="after")
    def _phase_matches_payload(self) -> ModelCheckpoint:
        if self.phase.value != self.phase_payload.phase:
            raise ValueError("Header phase does not match payload phase")
        return self


def seed_dump(model: ModelCheckpoint) -> str:
    """The seed's file content for ``model`` (HandlerCheckpointWrite)."""
    import yaml

    text: str = yaml.dump(model.model_dump(mode="json"), default_flow_style=False, sort_keys=False,
                          allow_unicode=True)
    return text
