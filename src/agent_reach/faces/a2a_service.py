"""The A2A face's operations, binding-free: each takes the call's params (v1.0 JSON names)
and the authenticated principal and returns the v1.0 result, or raises `A2AError`.

A message is one invocation: `metadata.capability` names the skill (client-directed),
otherwise its text is routed. Text parts are the text, the first data part the payload,
and a `messageId` that is a valid request id is the request_id (a re-sent message is
answered from the idempotency store, never run twice). A synchronous answer is a Task in
`TASK_STATE_COMPLETED` (`answered`: the record is the whole task) whose artifact is the
agent's answer, its id the request id; a client that asks for a Message (message
metadata `{"reply": "message"}`) gets the answer as one, and nothing is kept. An
asynchronous or suspended answer is a Task (`board`), a streamed reply too (`stream`,
its id the request id), and a message no registered capability fits (`no_match`,
`ambiguous`, `no_capability`) is a Task in `TASK_STATE_REJECTED` whose status message
says why, with the route's candidates. Those Tasks are kept in the `A2AStore` for
`GetTask`, `ListTasks`, `CancelTask` and push configs; a Message's id also reads back as
a Task (from its idempotency record), but is not listed.

A Task never takes a second message: every delivery runs once, to its end, so a message
naming a known `taskId` is refused (`-32004`, the task's state in the message; the spec's
CORE-SEND-002 for a task that ended), and no Task is cancelable (`-32002`): a delivery
the coordinator accepted is never abandoned half-way. A `contextId` is kept: a follow-up
is a new message in the task's context (`referenceTaskIds` may name the task), and lists
with it.

Why hand-written, not the a2a-sdk's `DefaultRequestHandler` and task store (issue 34):
the face must cost at most 1.5x `/v1/invoke`'s CPU per message send. Measured with
`bench/a2a_face.py` (3000 sends at 16 concurrent, servers on one core, 2-core host): the
SDK's own server answering a fixed Message with no delivery at all costs 2.03 ms CPU per
request; the coordinator's `/v1/invoke` with a full delivery 0.48 ms, this face's `/a2a`
1.03 ms. A face on the SDK handler would start at 4.2x `/v1/invoke` before routing
anything (its protobuf conversions, event queue and task-store round trips per send), so
the goal is out of its reach; here a synchronous send is one invocation and one store
write (its Task; none when the client asks for a Message). With the edge's fast path
(`server/fastfaces/a2a.py`) a send cost 1.13-1.47x `/v1/invoke`'s CPU (`bench/faces.py`,
wrk, the same agent), measured when a send kept no Task. The SDK stays the reference we
test against (its Python and JavaScript clients, its server as the agent behind the
`a2a` transport). Entry points for an edge without ASGI:
`a2a_rpc.answer_rpc(handler, body, principal, trace, version)` and `A2AFace`, both on
the narrow `FaceHandler` (`handler.py`).
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import ValidationError

from agent_reach.adapters import a2a_messages as msgs
from agent_reach.errors import ReachError, UnknownTask
from agent_reach.faces import a2a_tasks as views
from agent_reach.faces.a2a_errors import (
    CONTENT_TYPE_NOT_SUPPORTED,
    INVALID_PARAMS,
    NOT_CANCELABLE,
    UNSUPPORTED,
    A2AError,
    error_of,
)
from agent_reach.faces.a2a_push import PushConfigs
from agent_reach.faces.a2a_stream import StreamedReply
from agent_reach.faces.a2a_tasks import owner_of
from agent_reach.model.invocations import REQUEST_ID_PATTERN, InvokeRequest
from agent_reach.model.keys import Principal
from agent_reach.observability.tracecontext import TraceContext
from agent_reach.wire.answer import Answer

if TYPE_CHECKING:
    from agent_reach.faces.handler import FaceHandler

REJECTING = frozenset({"no_match", "ambiguous", "no_capability"})  # "no skill fits": declined
LIVE_KINDS = frozenset({"board", "stream"})  # records whose state is read elsewhere
MAX_CANDIDATES = 5  # of the route, named in a rejection
_REQUEST_ID = re.compile(REQUEST_ID_PATTERN)


class A2AFace:
    """The operations of the face for one coordinator (cheap: make one per call)."""

    def __init__(self, handler: FaceHandler) -> None:
        self.handler = handler

    # -- messages ---------------------------------------------------------------------

    async def send(
        self, params: dict[str, Any], principal: Principal, trace: TraceContext
    ) -> dict[str, Any]:
        """`SendMessage`: `{"message": ...}` or `{"task": ...}`."""
        message = await self._message(params, principal)
        request = _invocation(message, params.get("configuration") or {})
        answer = await self.handler.invoke(request, trace, principal, stream=False)
        return await self._answered(params, principal, request, message, answer)

    async def stream(
        self, params: dict[str, Any], principal: Principal, trace: TraceContext, version: str
    ) -> StreamedReply:
        """`SendStreamingMessage`, asking the routed agent for a stream (`a2a_stream.py`)."""
        message = await self._message(params, principal)
        request = _invocation(message, params.get("configuration") or {})
        if request.request_id is None:  # the Task's id, read back with GetTask
            request = request.model_copy(update={"request_id": uuid.uuid4().hex})
        answer = await self.handler.invoke(request, trace, principal, stream=True)
        context_id = message.get("contextId")
        context = context_id if isinstance(context_id, str) else None
        if answer.stream is not None:
            task_id = str(request.request_id)
            await self._keep(principal, task_id, context, "stream", message)
            return StreamedReply(version, task_id, context, stream=answer.stream)
        result = await self._answered(params, principal, request, message, answer)
        if version == "0.3":
            kind, value = next(iter(result.items()))
            result = views.v03(value, kind)
        return StreamedReply(version, "", context, result=result)

    async def _answered(
        self,
        params: dict[str, Any],
        principal: Principal,
        request: InvokeRequest,
        message: dict[str, Any],
        answer: Answer,
    ) -> dict[str, Any]:
        """A send's result: the reply Message, or the Task of a queued, suspended or
        declined message (with the push config the message gave)."""
        document = orjson.loads(answer.body)
        context_id = message.get("contextId") if isinstance(message.get("contextId"), str) else None
        if answer.status == 202:
            task_id = str(document.get("task_id"))
            task = await self._keep(principal, task_id, context_id, "board", message)
            await self._watch(params, principal, task_id)
            status, _ = views.board_view(document)
            return {"task": views.with_history({**task, "status": status}, None)}
        if answer.status >= 300:
            return await self._refusal(params, principal, request, message, answer, document)
        if _wants_message(message):
            return {"message": _reply(document, context_id)}
        task_id = str(document.get("request_id") or request.request_id or uuid.uuid4().hex)
        done = {
            "artifacts": [
                {"artifactId": f"{task_id}-result", "parts": views.parts(document.get("result"))}
            ],
            "metadata": _answer_ids(document),
        }
        status = {
            "state": views.STATES.get(str(document.get("status")), "TASK_STATE_COMPLETED"),
            "timestamp": views.timestamp(self.handler.clock.wall()),
        }
        task = await self._keep(principal, task_id, context_id, "answered", message, status, done)
        await self._watch(params, principal, task_id)  # its one state, pushed once
        return {"task": views.with_history(task, _history_length(params))}

    async def _message(self, params: dict[str, Any], principal: Principal) -> dict[str, Any]:
        message = params.get("message")
        if not isinstance(message, dict):
            raise A2AError(INVALID_PARAMS, "params.message is required")
        _check_parts(message.get("parts"))
        task_id = message.get("taskId")
        if task_id:
            task = await self.task(principal, str(task_id))  # -32001 when unknown
            state = task["status"]["state"]
            raise A2AError(
                UNSUPPORTED,
                f"task {task_id} is {state}: a task here is one delivery and takes no "
                "further message; send a new message (same contextId) instead",
                {"state": state},
            )
        return message

    async def _refusal(
        self,
        params: dict[str, Any],
        principal: Principal,
        request: InvokeRequest,
        message: dict[str, Any],
        answer: Answer,
        document: Any,
    ) -> dict[str, Any]:
        """A declined message as a rejected Task; any other failure as an A2A error."""
        error = _error_of(answer, document)
        if error.code not in REJECTING:
            raise error_of(error)
        route = error.details.get("route") or {}
        candidates = _candidates(route)
        thresholds = [t["statement"] for t in route.get("thresholds") or [] if isinstance(t, dict)]
        why = {
            "code": error.code,
            "message": error.message,
            "candidates": candidates,
            "thresholds": thresholds,
        }
        context_id = message.get("contextId") if isinstance(message.get("contextId"), str) else None
        task_id = request.request_id or uuid.uuid4().hex
        status = {
            "state": "TASK_STATE_REJECTED",
            "message": views.agent_message(
                [{"text": "; ".join([error.message, *thresholds])}, {"data": why}],
                context_id,
                taskId=task_id,
            ),
            "timestamp": views.timestamp(self.handler.clock.wall()),
        }
        task = await self._keep(principal, task_id, context_id, "rejected", message, status)
        await self._watch(params, principal, task_id)
        return {"task": views.with_history(task, None)}

    async def _keep(
        self,
        principal: Principal,
        task_id: str,
        context_id: str | None,
        kind: str,
        message: dict[str, Any],
        status: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record a new face task (with `extra` fields: artifacts, metadata); its history
        is the message (with the task's ids)."""
        now = self.handler.clock.wall()
        context = context_id or task_id
        record: dict[str, Any] = {
            "id": task_id,
            "contextId": context,
            "kind": kind,
            "createdAt": now,
            "history": [{**message, "taskId": task_id, "contextId": context}],
            "status": status
            or {"state": "TASK_STATE_SUBMITTED", "timestamp": views.timestamp(now)},
            **(extra or {}),
        }
        try:
            await self.handler.a2a_store.put_task(
                owner_of(principal), task_id, orjson.dumps(record), now, self.handler.task_ttl_s
            )
        except ReachError as exc:
            raise error_of(exc) from None
        return record

    async def _watch(self, params: dict[str, Any], principal: Principal, task_id: str) -> None:
        """A push config given with the message (`configuration.taskPushNotificationConfig`,
        v0.3 `pushNotificationConfig`) is set on the new task."""
        configuration = params.get("configuration") or {}
        given = configuration.get("taskPushNotificationConfig") or configuration.get(
            "pushNotificationConfig"
        )
        if isinstance(given, dict):
            await PushConfigs(self).create({**given, "taskId": task_id}, principal)

    # -- tasks ------------------------------------------------------------------------

    async def task(self, principal: Principal, task_id: Any) -> dict[str, Any]:
        """The caller's task with its current state (its record, `createdAt` and `kind`
        included); -32001 when unknown or another principal's."""
        if not isinstance(task_id, str) or not _REQUEST_ID.match(task_id):
            raise A2AError(INVALID_PARAMS, "the task id is not a task id")
        try:
            raw = await self.handler.a2a_store.get_task(owner_of(principal), task_id)
            if raw is None:  # a synchronous message's id, or a task of `/v1/invoke`
                document = await self._board_or_record(principal, task_id)
                status, artifacts = views.board_view(document)
                task: dict[str, Any] = {"id": task_id, "contextId": task_id, "status": status}
                return {**task, "artifacts": artifacts} if artifacts else task
            record: dict[str, Any] = orjson.loads(raw)
            if record["kind"] == "board":
                document = await self.handler.board_task(principal, task_id)
            elif record["kind"] == "stream":
                document = await self._streamed(principal, task_id)
            else:
                return record
        except ReachError as exc:
            raise error_of(exc) from None
        status, artifacts = views.board_view(document)
        record["status"] = {
            **status,
            "timestamp": status.get("timestamp") or record["status"].get("timestamp"),
        }
        if artifacts:
            record["artifacts"] = artifacts
        return record

    async def get(self, params: dict[str, Any], principal: Principal) -> dict[str, Any]:
        """`GetTask`, with `historyLength` messages of its history (all when absent)."""
        length = params.get("historyLength")
        if length is not None and (not isinstance(length, int) or length < 0):
            raise A2AError(INVALID_PARAMS, "historyLength must be a whole number >= 0")
        return views.with_history(await self.task(principal, params.get("id")), length)

    async def list(self, params: dict[str, Any], principal: Principal) -> dict[str, Any]:
        """`ListTasks`: the caller's tasks, most recently updated first, filtered and paged."""
        length = params.get("historyLength")
        if length is not None and (not isinstance(length, int) or length < 0):
            raise A2AError(INVALID_PARAMS, "historyLength must be a whole number >= 0")
        try:
            raw = await self.handler.a2a_store.list_tasks(owner_of(principal), 1000)
        except ReachError as exc:
            raise error_of(exc) from None
        tasks = []
        for item in raw:
            record = orjson.loads(item)
            try:
                tasks.append(
                    await self.task(principal, record["id"])
                    if record["kind"] in LIVE_KINDS
                    else record
                )
            except A2AError:
                continue  # its invocation record expired first
        try:
            chunk, token, total = views.page(tasks, params)
        except ValueError as exc:
            raise A2AError(INVALID_PARAMS, str(exc)) from None
        keep_artifacts = params.get("includeArtifacts") is True
        shown = []
        for task in chunk:
            view = views.with_history(task, 0 if length is None else length)
            if not keep_artifacts:
                view.pop("artifacts", None)
            shown.append(view)
        return {
            "tasks": shown,
            "nextPageToken": token,
            "pageSize": len(shown),
            "totalSize": total,
        }

    async def cancel(self, params: dict[str, Any], principal: Principal) -> dict[str, Any]:
        """`CancelTask`: -32001 for an unknown task, else -32002 (see the module doc)."""
        task_id = params.get("id")
        task = await self.task(principal, task_id)
        state = task["status"]["state"]
        if state in views.TERMINAL:
            raise A2AError(NOT_CANCELABLE, f"task {task_id} has ended ({state})", {"state": state})
        raise A2AError(
            NOT_CANCELABLE,
            f"task {task_id} is {state}: an accepted delivery runs to its end, never "
            "abandoned half-way (it may have acted)",
            {"state": state},
        )

    async def _board_or_record(self, principal: Principal, task_id: str) -> dict[str, Any]:
        try:
            return await self.handler.board_task(principal, task_id)
        except UnknownTask:
            return await self._streamed(principal, task_id)

    async def _streamed(self, principal: Principal, task_id: str) -> dict[str, Any]:
        """A request's Task from its idempotency record."""
        record = await self.handler.invocation_record(principal, task_id)
        if record is None:
            raise UnknownTask(f"no task {task_id!r} (unknown or expired)")
        if record.state != "completed":
            return {"task_id": task_id, "status": "running"}
        return {
            "task_id": task_id,
            "http_status": record.status,
            "answer": orjson.loads(record.body),
        }


def _invocation(message: dict[str, Any], configuration: dict[str, Any]) -> InvokeRequest:
    parts = msgs.parts_of(message.get("parts"))
    metadata = message.get("metadata") or {}
    capability = metadata.get("capability") if isinstance(metadata, dict) else None
    message_id = message.get("messageId")
    asynchronous = (
        configuration.get("returnImmediately") is True or configuration.get("blocking") is False
    )
    try:
        return InvokeRequest(
            capability=capability,
            text=parts["text"],
            payload=parts["data"],
            request_id=message_id
            if isinstance(message_id, str) and _REQUEST_ID.match(message_id)
            else None,
            mode="async" if asynchronous else "sync",
        )
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()
        ]
        raise A2AError(
            INVALID_PARAMS,
            "the message gives neither a skill (metadata.capability) nor text",
            {"code": "validation_error", "problems": problems},
        ) from None


def _error_of(answer: Answer, document: Any) -> ReachError:
    error = document.get("error", {}) if isinstance(document, dict) else {}
    exc = ReachError(
        str(error.get("message", "")),
        code=str(error.get("code", "internal_error")),
        status=answer.status,
    )
    exc.details = {k: v for k, v in error.items() if k not in ("code", "message")}
    return exc


def _check_parts(parts: Any) -> None:
    """-32005 for a part an agent behind the face cannot be given: a delivery carries
    text and JSON, so a file (`raw`, `url`; v0.3 `file`) is refused, never dropped."""
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict) and ({"raw", "url", "file"} & part.keys()):
            file = part.get("file")
            inner = file.get("mimeType") if isinstance(file, dict) else None
            media = part.get("mediaType") or inner or "file"
            raise A2AError(
                CONTENT_TYPE_NOT_SUPPORTED,
                f"{media} parts are not accepted: send text or data parts",
                {"mediaType": str(media), "accepted": ["text/plain", "application/json"]},
            )


def _wants_message(message: dict[str, Any]) -> bool:
    """The client asked for the answer as a Message, not a Task (`metadata.reply`): the
    A2A spec lets an agent answer either way and gives a client no field to choose."""
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and metadata.get("reply") == "message"


def _history_length(params: dict[str, Any]) -> int | None:
    """`configuration.historyLength` (the messages of history in the answer), when valid."""
    configuration = params.get("configuration")
    length = configuration.get("historyLength") if isinstance(configuration, dict) else None
    return length if isinstance(length, int) and not isinstance(length, bool) else None


def _answer_ids(document: dict[str, Any]) -> dict[str, Any]:
    return {key: document.get(key) for key in ("request_id", "trace_id", "agent_id", "status")}


def _reply(document: dict[str, Any], context_id: str | None) -> dict[str, Any]:
    return views.agent_message(
        views.parts(document.get("result")), context_id, metadata=_answer_ids(document)
    )


def _candidates(route: dict[str, Any]) -> list[dict[str, Any]]:
    """The capabilities the text came closest to, each once, with its match confidence
    (what the refusal weighed: never an instance's score, which mixes in its health)."""
    seen: dict[str, Any] = {}
    for candidate in route.get("candidates") or []:
        tag = candidate.get("capability") if isinstance(candidate, dict) else None
        if isinstance(tag, str) and tag not in seen:
            seen[tag] = (candidate.get("factors") or {}).get("match")
    ranked = list(seen.items())[:MAX_CANDIDATES]
    return [{"capability": tag, "confidence": confidence} for tag, confidence in ranked]
