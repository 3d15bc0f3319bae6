"""What the router learned and how it calibrated itself: feedback, learned examples, fits."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from agent_reach.model.feedback import FeedbackRequest
from agent_reach.security.ownership import require_not_observer
from agent_reach.server.auth import Admin, Caller, authenticated
from agent_reach.server.responses import json_response
from agent_reach.server.runtime import runtime_of

router = APIRouter(prefix="/v1", tags=["routing"], dependencies=[Depends(authenticated)])


@router.post("/feedback", status_code=201)
async def feedback(body: FeedbackRequest, request: Request, principal: Caller) -> Response:
    """The capability that should have served an earlier text request (yours, routed
    within the policy's `learning.correctable_s`): the router learns its text at once.
    Or a `rating` (good or bad) of an earlier request's answer, by its original caller or
    an agent of its delegation chain that delegated it: it counts once, within the
    policy's `quality.window_s`, for the instance that served it (mesh/quality.py).

    404 `unknown_request` for an id that is not one of your text requests (requests, to
    rate); 422 for a capability no agent offers; 403 for one you may not invoke; 409
    `already_rated` for a second rating.
    """
    runtime = runtime_of(request)
    if body.rating is not None:
        require_not_observer(principal, "rate an answer")
        rated = await runtime.quality.rate(principal, body.request_id, body.rating)
        return json_response({"rated": rated}, status=201)
    assert body.capability is not None  # the body has one of the two
    require_not_observer(principal, "correct a route")
    runtime.gate.authorize(principal, body.capability)
    example = await runtime.learning.correct(principal, body.request_id, body.capability)
    return json_response({"learned": example}, status=201)


@router.get("/routing/learned")
async def learned(
    request: Request,
    _: Admin,
    capability: Annotated[str | None, Query(max_length=128)] = None,
) -> Response:
    """Every learned example in force (admins: the texts are users' words), newest first."""
    examples = await runtime_of(request).learning.examples(capability)
    return json_response({"examples": examples})


@router.delete("/routing/learned/{example_id}", status_code=204)
async def forget(example_id: str, request: Request, _: Admin) -> Response:
    """Forget one learned example on every coordinator; 404 when there is none."""
    await runtime_of(request).learning.forget(example_id)
    return Response(status_code=204)


@router.get("/routing/calibration")
async def calibration(request: Request) -> Response:
    """The self-calibration in force for each set of matchers: the map from raw scores to
    calibrated confidences, what it was fitted on, and what the policy's thresholds should
    give on texts like the held-out ones."""
    runtime = runtime_of(request)
    policy = runtime.policy()
    fits: list[dict[str, Any]] = []
    for names, (catalog, fitted) in runtime.routing.matching.calibrations().items():
        expected = fitted.expected(policy.min_confidence, policy.margin)
        fits.append(
            {
                "matchers": list(names),
                "catalog_version": list(catalog),
                "fitted": fitted.fitted,
                "slope": round(fitted.slope, 4),
                "intercept": round(fitted.intercept, 4),
                "held_out": {
                    "in_scope": fitted.in_scope_texts,
                    "out_of_scope": fitted.out_of_scope_texts,
                },
                "expected": expected,
            }
        )
    return json_response(
        {
            "thresholds": {"min_confidence": policy.min_confidence, "margin": policy.margin},
            "matching": runtime.routing.matching.status(policy),
            "calibrations": fits,
        }
    )
