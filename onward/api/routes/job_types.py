"""GET /job-types (issue 37): the job types workers declared, each with its retry policy."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.depends import Depends

from onward.api.answers import json_answer
from onward.api.auth import Principal
from onward.api.contract.job_types import JobTypeAnswer, JobTypesAnswer, RetryPolicyAnswer
from onward.api.openapi import SECURED, ok, secured
from onward.api.request import caller
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.retry_policy import PLATFORM_POLICY

router = new_router()


@router.get("/job-types", operation_id="listJobTypes", security=SECURED, responses=secured({
    200: ok("the declared job types, by name, each with its retry policy and the worker that declared it last",
            JobTypesAnswer)}))
def list_job_types(_: Annotated[Principal, Depends(caller)]) -> Response[str]:
    """The job types workers declared (any credential: the types are the platform's, not a tenant's), read
    through the store's cache (a declaration shows within onward.store.job_types.CACHE_S)."""
    declared = ApiDeployment.from_environment().job_store.type_catalog.declared_types()
    return json_answer(200, JobTypesAnswer(types=[JobTypeAnswer.of(declared[name]) for name in sorted(declared)],
                                           platform_default=RetryPolicyAnswer.of(PLATFORM_POLICY)))
