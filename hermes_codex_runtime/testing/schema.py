"""The app-server protocol schema of the INSTALLED codex binary, and a validator for it.

``codex app-server generate-json-schema --out DIR`` writes the authoritative JSON schema (draft-07)
of every message. :class:`ProtocolSchema` loads it and checks messages the way codex's serde
decoder treats them:

* ``errors`` — what codex would reject (missing required fields, wrong types, unknown enum
  variants, unknown fields where the type denies them);
* ``ignored`` — fields codex would silently DROP (an unknown field on a type that does not deny
  them). A client that sends one lost some intent without any error: tests assert there are none.

Only the keywords the generator emits are implemented: ``$ref``, ``type``, ``properties``,
``required``, ``additionalProperties``, ``enum``, ``const``, ``anyOf``, ``oneOf``, ``allOf``,
``items``, ``minimum``, ``minLength``. Standard library only: ``jsonschema`` would answer the
``errors`` half, but not ``ignored`` — which fields a matched branch would drop needs this walk
of the schema (``$ref``, the tagged unions, the branch that matched) anyway.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JsonObject = dict[str, Any]


@dataclass(slots=True)
class Verdict:
    """The outcome of checking one message."""

    errors: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when codex would accept the message (ignored fields are reported separately)."""
        return not self.errors

    @property
    def clean(self) -> bool:
        """True when codex would accept it and use every field in it."""
        return not self.errors and not self.ignored


_TYPE_CHECKS = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "null": lambda v: v is None,
}


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"number `{value}`"
    if isinstance(value, str):
        return f"string {json.dumps(value[:40])}"
    if isinstance(value, list):
        return "a sequence"
    return "a map"


class _Document:
    """One schema file with ``$ref`` resolution inside it."""

    def __init__(self, data: JsonObject) -> None:
        self.data = data

    def resolve(self, ref: str) -> JsonObject:
        if not ref.startswith("#/"):
            raise ValueError(f"unsupported $ref {ref!r}")
        node: Any = self.data
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node  # type: ignore[no-any-return]

    def check(self, schema: JsonObject, value: Any, path: str) -> Verdict:
        verdict = Verdict()
        errors, ignored = self._value(schema, value, path)
        verdict.errors.extend(errors)
        verdict.ignored.extend(ignored)
        return verdict

    def _value(self, schema: JsonObject, value: Any, path: str) -> tuple[list[str], list[str]]:
        errors, ignored, known = self._node(schema, value, path)
        if isinstance(value, dict) and known is not None:
            ignored.extend(f"{path}.{key}" for key in value if key not in known)
        return errors, ignored

    def _node(
        self, schema: JsonObject, value: Any, path: str
    ) -> tuple[list[str], list[str], set[str] | None]:
        """Check ``value`` against one schema node. Returns errors, ignored fields found below,
        and the property names this node claims for an object value (``None``: not structured,
        or open to any key)."""
        if not isinstance(schema, dict):
            return [], [], None  # the schema `true`: anything goes
        depth_guard = 0
        while "$ref" in schema:
            schema = self.resolve(schema["$ref"])
            depth_guard += 1
            if depth_guard > 50:  # pragma: no cover - a cyclic alias chain
                return [f"{path}: $ref cycle"], [], None
        errors: list[str] = []
        ignored: list[str] = []
        known: set[str] = set()
        structured = False
        open_object = False

        def merge(sub_known: set[str] | None, sub_structured: bool) -> None:
            nonlocal structured, open_object
            if sub_structured:
                structured = True
                if sub_known is None:
                    open_object = True
                else:
                    known.update(sub_known)

        for sub in schema.get("allOf", ()):
            e, i, k = self._node(sub, value, path)
            errors.extend(e)
            ignored.extend(i)
            merge(k, k is not None or self._claims_object(sub))

        for key in ("oneOf", "anyOf"):
            branches = schema.get(key)
            if not branches:
                continue
            first_failure: list[str] | None = None
            tagged_failure = False
            for branch in branches:
                e, i, k = self._node(branch, value, path)
                if not e:
                    ignored.extend(i)
                    merge(k, k is not None or self._claims_object(branch))
                    break
                if self._tag_matches(branch, value) or first_failure is None or (
                        len(e) < len(first_failure) and not tagged_failure):
                    tagged_failure = tagged_failure or self._tag_matches(branch, value)
                    first_failure = e
            else:
                title = schema.get("title") or "enum"
                detail = f" ({first_failure[0]})" if first_failure else ""
                errors.append(f"{path}: data did not match any variant of {title}{detail}")

        kind = schema.get("type")
        if kind is not None:
            kinds = kind if isinstance(kind, list) else [kind]
            if not any(_TYPE_CHECKS.get(k, lambda v: True)(value) for k in kinds):
                expected = "/".join(kinds)
                errors.append(f"{path}: invalid type: {_describe(value)}, expected {expected}")
                return errors, ignored, None
        if "enum" in schema and value not in schema["enum"]:
            expected = ", ".join(f"`{v}`" for v in schema["enum"][:12])
            errors.append(f"{path}: unknown variant `{value}`, expected one of {expected}")
        if "const" in schema and value != schema["const"]:
            errors.append(f"{path}: expected `{schema['const']}`")
        if isinstance(value, int | float) and not isinstance(value, bool):
            minimum = schema.get("minimum")
            if isinstance(minimum, int | float) and value < minimum:
                errors.append(f"{path}: {value} is below the minimum {minimum}")
        if isinstance(value, str):
            min_length = schema.get("minLength")
            if isinstance(min_length, int) and len(value) < min_length:
                errors.append(f"{path}: shorter than {min_length} characters")

        if isinstance(value, dict) and (
            "properties" in schema or "required" in schema or "additionalProperties" in schema
        ):
            structured = True
            props: JsonObject = schema.get("properties", {})
            for name in schema.get("required", ()):
                if name not in value:
                    errors.append(f"{path}: missing field `{name}`")
            extra = schema.get("additionalProperties")
            for name, sub_value in value.items():
                if name in props:
                    e, i = self._value(props[name], sub_value, f"{path}.{name}")
                    errors.extend(e)
                    ignored.extend(i)
                    known.add(name)
                elif isinstance(extra, dict):
                    e, i = self._value(extra, sub_value, f"{path}.{name}")
                    errors.extend(e)
                    ignored.extend(i)
                    known.add(name)
                elif extra is True:
                    known.add(name)
                elif extra is False and name not in known:
                    errors.append(f"{path}: unknown field `{name}`")
                    known.add(name)
            known.update(props)

        if isinstance(value, list) and isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                e, i = self._value(schema["items"], item, f"{path}[{index}]")
                errors.extend(e)
                ignored.extend(i)

        if not structured or open_object:
            return errors, ignored, None
        return errors, ignored, known

    def _tag_matches(self, schema: JsonObject, value: Any) -> bool:
        """True when ``value`` is an object whose ``type`` tag selects this branch."""
        if not isinstance(value, dict) or "type" not in value or not isinstance(schema, dict):
            return False
        while "$ref" in schema:
            schema = self.resolve(schema["$ref"])
        tag = schema.get("properties", {}).get("type", {})
        return isinstance(tag, dict) and value["type"] in tag.get("enum", ())

    def _claims_object(self, schema: JsonObject) -> bool:
        if not isinstance(schema, dict):
            return False
        seen = 0
        while "$ref" in schema and seen < 50:
            schema = self.resolve(schema["$ref"])
            seen += 1
        return "properties" in schema


def _method_of(branch: JsonObject) -> str | None:
    method = branch.get("properties", {}).get("method", {})
    values = method.get("enum")
    return values[0] if isinstance(values, list) and values else None


class ProtocolSchema:
    """The schema of one codex binary, indexed by method."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._client_requests = self._envelope("ClientRequest.json")
        self._client_notifications = self._envelope("ClientNotification.json")
        self._server_requests = self._envelope("ServerRequest.json")
        self._server_notifications = self._envelope("ServerNotification.json")
        bundle = self.directory / "codex_app_server_protocol.v2.schemas.json"
        self._v2 = _Document(json.loads(bundle.read_text()))
        init = self.directory / "v1" / "InitializeResponse.json"
        self._init_response = _Document(json.loads(init.read_text()))

    @classmethod
    def generate(cls, codex_bin: str, out_dir: str | os.PathLike[str], *,
                 experimental: bool = False) -> ProtocolSchema:
        """Run ``codex app-server generate-json-schema --out out_dir`` and load the result.
        ``experimental`` includes the experimental API (what a connection that opted in with
        ``capabilities.experimentalApi`` may send, e.g. ``thread/start.dynamicTools``)."""
        import shutil
        import tempfile

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix="codex-scratch-")
        try:
            subprocess.run(
                [codex_bin, "app-server", "generate-json-schema", "--out", str(out),
                 *(["--experimental"] if experimental else [])],
                check=True,
                capture_output=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "CODEX_HOME": scratch},
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return cls(out)

    def _envelope(self, filename: str) -> tuple[_Document, dict[str, JsonObject]]:
        doc = _Document(json.loads((self.directory / filename).read_text()))
        by_method: dict[str, JsonObject] = {}
        for branch in doc.data.get("oneOf", ()):
            method = _method_of(branch)
            if method is not None:
                by_method[method] = branch
        return doc, by_method

    # ------------------------------------------------------------ method sets

    @property
    def client_request_methods(self) -> frozenset[str]:
        """Every request method a client may send."""
        return frozenset(self._client_requests[1])

    @property
    def server_request_methods(self) -> frozenset[str]:
        """Every request method the server may send."""
        return frozenset(self._server_requests[1])

    @property
    def server_notification_methods(self) -> frozenset[str]:
        """Every notification method the server may send."""
        return frozenset(self._server_notifications[1])

    # ------------------------------------------------------------ checks

    @staticmethod
    def _check_params(envelope: tuple[_Document, dict[str, JsonObject]], method: str,
                      params: Any, what: str) -> Verdict:
        doc, by_method = envelope
        branch = by_method.get(method)
        if branch is None:
            return Verdict(errors=[f"unknown variant `{method}` ({what})"])
        props = branch.get("properties", {})
        params_schema = props.get("params")
        if params_schema is None:
            if params not in (None, {}):
                return Verdict(ignored=["params"])
            return Verdict()
        if params is None and "params" not in branch.get("required", ()):
            return Verdict()
        return doc.check(params_schema, params, "params")

    def check_client_request(self, method: str, params: Any) -> Verdict:
        """A request the client sends."""
        return self._check_params(self._client_requests, method, params, "client request")

    def check_client_notification(self, method: str, params: Any) -> Verdict:
        """A notification the client sends (e.g. ``initialized``)."""
        return self._check_params(self._client_notifications, method, params,
                                  "client notification")

    def check_server_request(self, method: str, params: Any) -> Verdict:
        """A request the server sends (used to keep the fake app-server honest)."""
        return self._check_params(self._server_requests, method, params, "server request")

    def check_server_notification(self, method: str, params: Any) -> Verdict:
        """A notification the server sends (used to keep the fake app-server honest)."""
        return self._check_params(self._server_notifications, method, params,
                                  "server notification")

    def _response_name(self, envelope: tuple[_Document, dict[str, JsonObject]],
                       method: str) -> str | None:
        branch = envelope[1].get(method)
        if branch is None:
            return None
        ref = branch.get("properties", {}).get("params", {}).get("$ref", "")
        name = ref.rsplit("/", 1)[-1]
        return name[: -len("Params")] + "Response" if name.endswith("Params") else None

    def check_reply_to_server_request(self, method: str, result: Any) -> Verdict:
        """The client's reply (``result``) to a server request of ``method``."""
        name = self._response_name(self._server_requests, method)
        path = self.directory / f"{name}.json" if name else None
        if path is None or not path.exists():
            return Verdict(errors=[f"no response schema for server request {method!r}"])
        doc = _Document(json.loads(path.read_text()))
        return doc.check(doc.data, result, "result")

    def check_response(self, method: str, result: Any) -> Verdict:
        """The server's reply (``result``) to a client request of ``method``."""
        if method == "initialize":
            return self._init_response.check(self._init_response.data, result, "result")
        name = self._response_name(self._client_requests, method)
        definitions = self._v2.data.get("definitions", {})
        if name is None or name not in definitions:
            return Verdict(errors=[f"no response schema for client request {method!r}"])
        return self._v2.check(definitions[name], result, "result")
