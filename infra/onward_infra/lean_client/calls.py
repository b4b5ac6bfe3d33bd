"""A call sent without botocore's per-call machinery, for clients of the embedded endpoint (ONWARD_CLIENT_WRAPPER,
onward_infra.lean_client).

With the transport (onward_infra.lean_client.http) and the codec (onward_infra.lean_client.codec) lean, most of what
botocore still
cost per call on the embedded endpoint was the machinery around them: about a dozen events emitted, the
endpoint ruleset's parameters resolved on every call (for DynamoDB a jmespath search of the parameters for
its ResourceArnList), the user agent written twice, a request object whose headers are an email message.
Client CPU per request (a mix of GetItem, PutItem, Query and a 4-action TransactWriteItems, parameter
validation off, medians of 3 alternating runs of 1,200): 0.50 -> 0.28 ms; a GetItem alone 0.63 -> 0.22.

`use_lean_calls(client)` sends each call as botocore would, without the machinery: the idempotency tokens
botocore draws, the parameters checked and serialized by the client's own serializer (its validation
included), the request botocore writes for an unsigned client (`_LeanOperation.request`: the same bytes on
the wire but the invocation id), then botocore's own code for the rest: `_do_get_response` (its before-send
handlers, a stubber among them, the transport, checksums, the parser, modeled error fields),
`_needs_retry` (its retry handler, quota and delays) attempt by attempt as `Endpoint._send_request` does,
the after-call event (which gives back the retry quota), and the error class.

It stands aside (botocore's `_make_api_call`, unchanged) for an operation whose per-call event handlers
are not exactly botocore's defaults for such a client (DEFAULT_HANDLERS: a handler anyone registered on the
client, checked again whenever one is registered), for a signed client, and where the endpoint ruleset does
not resolve to the client's endpoint URL as it is.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import quote

from botocore import UNSIGNED
from botocore.awsrequest import AWSPreparedRequest, AWSRequest
from botocore.context import start_as_current_context
from botocore.model import OperationModel

from onward_infra.lean_client.codec import LeanJSONSerializer
from onward_infra.lean_client.http import LeanHttpSession

# The handlers botocore registers on a JSON-protocol client's per-call events, by the name their function
# or method has (qualname): what a lean call does in their place, or what does nothing for such a call.
DEFAULT_HANDLERS: Final[dict[str, frozenset[str]]] = {
    "provide-client-params": frozenset(),
    # generate_idempotent_uuid: done below; the validation-mode member: flexible checksums (S3 only)
    "before-parameter-build": frozenset({"generate_idempotent_uuid", "_handle_request_validation_mode_member"}),
    "before-endpoint-resolution": frozenset(),
    # the recursion-detection header: written below; the API-version header: a few other services only
    "before-call": frozenset({"add_recursion_detection_header", "inject_api_version_header_if_needed"}),
    # signing (the client is unsigned: checked), the retry headers and the user agent (botocore's, and the
    # feature Powertools appends to it): written as a first request's headers showed them (`_probe`)
    "request-created": frozenset({"RequestSigner.handler", "MaxAttemptsSeeder.seed_max_attempts",
                                  "UserAgentString.rebuild_and_replace_user_agent_handler",
                                  "add_retry_headers", "_create_feature_function.<locals>.add_powertools_feature"}),
    "choose-signer": frozenset({"set_operation_specific_signer", "_set_auth_scheme_preference_signer"}),
    "before-sign": frozenset(),
    "response-received": frozenset(),
    "after-call": frozenset({"RetryQuotaChecker.release_retry_quota"}),  # gives back only what a retry took
    "after-call-error": frozenset(),
}
# Not checked: "before-send" and "before-parse" (a stubber's answer among them) and "needs-retry" run in
# botocore's own `_do_get_response` and `_needs_retry`, which a lean call runs too.

MakeApiCall = Callable[[str, dict[str, Any]], Any]


def _handler_name(handler: Any) -> str:
    function = getattr(handler, "__func__", handler)
    return getattr(function, "__qualname__", type(handler).__name__)


class _LeanOperation:
    """What a lean call of one operation sends besides its body: the URL and the fixed headers."""

    def __init__(self, operation: OperationModel, url: str, user_agent: str, max_attempts: int | None) -> None:
        self.operation = operation
        self.url = url
        self.user_agent = user_agent
        self.max_attempts = max_attempts  # what botocore's MaxAttemptsSeeder puts in the retries context
        self.idempotent_members = tuple(operation.idempotent_members)
        self.stream_output = bool(operation.has_streaming_output or operation.has_event_stream_output)
        self.service_id = operation.service_model.service_id.hyphenize()

    def request(self, request_dict: dict[str, Any]) -> AWSPreparedRequest:
        """The request botocore would send for this attempt (unsigned): the serializer's headers, the user
        agent, the recursion-detection header inside a Lambda function, the invocation id and attempt."""
        headers: dict[str, str] = dict(request_dict["headers"])
        headers["User-Agent"] = self.user_agent
        trace_id = os.environ.get("_X_AMZN_TRACE_ID")
        if trace_id and "AWS_LAMBDA_FUNCTION_NAME" in os.environ and "X-Amzn-Trace-Id" not in headers:
            headers["X-Amzn-Trace-Id"] = quote(trace_id, safe="-=;:+&[]{}\"',")
        retries = request_dict["context"]["retries"]
        if self.max_attempts is not None:
            retries["max"] = self.max_attempts
        headers["amz-sdk-invocation-id"] = retries["invocation-id"]
        headers["amz-sdk-request"] = "; ".join(f"{key}={retries[key]}" for key in ("ttl", "attempt", "max")
                                               if key in retries)
        body = request_dict["body"]
        headers["Content-Length"] = str(len(body.encode() if isinstance(body, str) else body))  # as botocore's
        return AWSPreparedRequest(request_dict["method"], self.url, headers, request_dict["body"], self.stream_output,
                                  request_dict["context"])


class LeanCalls:
    """A client's `_make_api_call`: calls sent without botocore's machinery when it would change nothing
    (module docstring), botocore's own call (`original`) otherwise."""

    def __init__(self, client: Any, original: MakeApiCall) -> None:
        self._client = client
        self._original = original
        self._operations: dict[str, _LeanOperation | None] = {}
        self._handlers_seen: object = None  # the emitter's lookup cache the plans were made against
        self._lock = threading.Lock()

    def __call__(self, operation_name: str, api_params: dict[str, Any]) -> Any:
        plan = self._plan(operation_name, api_params)
        if plan is None:
            return self._original(operation_name, api_params)
        missing = [name for name in plan.idempotent_members if name not in api_params]
        if missing:  # botocore's generate_idempotent_uuid; its retries keep the token
            api_params = {**api_params, **{name: str(uuid.uuid4()) for name in missing}}
        request_dict = self._client._serializer.serialize_to_request(api_params, plan.operation)
        if (request_dict.get("url_path", "/") != "/" or request_dict.get("query_string")
                or "host_prefix" in request_dict):
            return self._original(operation_name, api_params)
        client = self._client
        request_dict["context"] = context = {"client_region": client.meta.region_name,
                                             "client_config": client.meta.config}
        events = client.meta.events
        try:
            http_response, parsed = self._send(plan, request_dict)
        except Exception as error:
            events.emit(f"after-call-error.{plan.service_id}.{operation_name}", exception=error, context=context)
            raise
        events.emit(f"after-call.{plan.service_id}.{operation_name}", http_response=http_response, parsed=parsed,
                    model=plan.operation, context=context)
        if http_response.status_code < 300:
            return parsed
        raise client.exceptions.from_code(parsed.get("Error", {}).get("Code"))(parsed, operation_name)

    def _send(self, plan: _LeanOperation, request_dict: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """botocore's Endpoint._send_request, each attempt's request written by `plan`."""
        endpoint = self._client._endpoint
        context = request_dict["context"]
        attempts = 1
        endpoint._update_retries_context(context, attempts)
        answer, exception = endpoint._do_get_response(plan.request(request_dict), plan.operation, context)
        while endpoint._needs_retry(attempts, plan.operation, request_dict, answer, exception):
            attempts += 1
            endpoint._update_retries_context(context, attempts, answer)
            answer, exception = endpoint._do_get_response(plan.request(request_dict), plan.operation, context)
        if answer is not None and "ResponseMetadata" in answer[1]:
            answer[1]["ResponseMetadata"]["RetryAttempts"] = attempts - 1
        if exception is not None:
            raise exception
        return answer  # type: ignore[no-any-return]

    def _plan(self, operation_name: str, api_params: dict[str, Any]) -> _LeanOperation | None:
        emitter = self._client.meta.events._emitter
        handlers_now = emitter._lookup_cache  # replaced by a new dict whenever a handler is (un)registered
        with self._lock:
            if handlers_now is not self._handlers_seen:
                self._operations = {}
                self._handlers_seen = handlers_now
            if operation_name in self._operations:
                return self._operations[operation_name]
            plan = self._operations[operation_name] = self._lean_operation(operation_name, api_params)
            return plan

    def _lean_operation(self, operation_name: str, api_params: dict[str, Any]) -> _LeanOperation | None:
        client = self._client
        operation = client.meta.service_model.operation_model(operation_name)
        if (not self._default_handlers(operation) or client._request_signer.signature_version is not UNSIGNED
                or operation.has_streaming_input or operation.http_checksum_required or operation.http_checksum
                or operation.request_compression or client.meta.config.auth_scheme_preference):
            return None
        context = {"client_region": client.meta.region_name, "client_config": client.meta.config,
                   "auth_type": operation.resolved_auth_type, "has_streaming_input": False}
        with start_as_current_context():  # the user agent names the features the resolution used
            url, headers, _ = client._resolve_endpoint_ruleset(operation, api_params, context)
            user_agent, max_attempts = self._probe(operation, url)
        if headers or url.rstrip("/") != (client.meta.endpoint_url or "").rstrip("/"):
            return None
        return _LeanOperation(operation, url.rstrip("/") + "/", user_agent, max_attempts)

    def _probe(self, operation: OperationModel, url: str) -> tuple[str, int | None]:
        """The user agent and the max attempts botocore's request-created handlers (DEFAULT_HANDLERS: what
        they write does not change from call to call) give a request of `operation`."""
        probe = AWSRequest(method="POST", url=url, headers={"User-Agent": "-"}, data=b"")
        probe.context = {"retries": {"attempt": 1, "invocation-id": "-"}}
        self._client.meta.events.emit(f"request-created.{operation.service_model.service_id.hyphenize()}."
                                      f"{operation.name}", request=probe, operation_name=operation.name)
        return probe.prepare().headers["User-Agent"], probe.context["retries"].get("max")  # (headers as sent)

    def _default_handlers(self, operation: OperationModel) -> bool:
        """Whether every handler of the operation's per-call events is one of DEFAULT_HANDLERS."""
        events = self._client.meta.events
        service_id = operation.service_model.service_id.hyphenize()
        for event, allowed in DEFAULT_HANDLERS.items():
            name = events._alias_event_name(f"{event}.{service_id}.{operation.name}")
            if any(_handler_name(handler) not in allowed for handler in events._emitter._handlers.prefix_search(name)):
                return False
        return True


def use_lean_calls(client: Any) -> Any:
    """Send `client`'s first attempts straight (module docstring); `client`, for chaining. For a client whose
    transport and codec are lean already (use_lean_http, then use_lean_json)."""
    if not isinstance(client._endpoint.http_session, LeanHttpSession):
        raise ValueError("lean calls need the lean transport (use_lean_http) first")
    serializer = getattr(client._serializer, "_serializer", client._serializer)
    if not isinstance(serializer, LeanJSONSerializer):
        raise ValueError("lean calls need the lean codec (use_lean_json) first")
    if not isinstance(vars(client).get("_make_api_call"), LeanCalls):
        client._make_api_call = LeanCalls(client, client._make_api_call)
    return client
