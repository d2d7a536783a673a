"""The app-server protocol schema of the INSTALLED codex binary, and a validator for it.

``codex app-server generate-json-schema --out DIR`` writes the authoritative JSON schema (draft-07)
of every message. :class:`ProtocolSchema` loads it and checks messages the way codex's serde
decoder treats them:

* ``errors`` — what codex would reject (missing required fields, wrong types, unknown enum
  variants, unknown fields where the type denies them): the ``jsonschema`` library's draft-07
  verdict, each error worded like serde's and led by its path (``params.input[0]``);
* ``ignored`` — fields codex would silently DROP (an unknown field on a type that does not deny
  them). A client that sends one lost some intent without any error: tests assert there are none.
  No schema keyword says this, so a short walk over the schema names them: the keys of an object
  that no branch it matched declares.

``jsonschema`` is test support (the ``devtools`` extra), like the rest of ``testing/``.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.jsonschema import DRAFT7

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


_OBJECT_KEYWORDS = frozenset({"properties", "required", "additionalProperties"})


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


def _path(root: str, steps: Any) -> str:
    return root + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps)


class _Document:
    """One schema file: ``jsonschema`` validation against it, ``$ref`` resolution inside it."""

    def __init__(self, data: JsonObject) -> None:
        self.data = data
        self._validator = Draft7Validator(data)
        self._resolver = Registry().resolver_with_root(DRAFT7.create_resource(data))

    def check(self, schema: JsonObject, value: Any, root: str) -> Verdict:
        """``value`` (at ``root``: ``params`` or ``result``) against ``schema``, a node of this
        document."""
        errors = self._validator.evolve(schema=schema).iter_errors(value)
        messages = [m for error in errors for m in self._messages(error, root)]
        return Verdict(errors=list(dict.fromkeys(messages)),
                       ignored=self._ignored(schema, value, root))

    # ------------------------------------------------------------ errors, worded like serde's

    def _messages(self, error: ValidationError, root: str) -> list[str]:
        where = _path(root, error.absolute_path)
        keyword, expected, value = error.validator, error.validator_value, error.instance
        if keyword == "type":
            kinds = "/".join(expected) if isinstance(expected, list) else expected
            return [f"{where}: invalid type: {_describe(value)}, expected {kinds}"]
        if keyword == "required":
            return [f"{where}: missing field `{name}`" for name in expected if name not in value]
        if keyword == "additionalProperties" and isinstance(value, dict):
            declared = error.schema.get("properties", {})
            return [f"{where}: unknown field `{name}`" for name in value if name not in declared]
        if keyword == "enum":
            variants = ", ".join(f"`{v}`" for v in expected[:12])
            return [f"{where}: unknown variant `{value}`, expected one of {variants}"]
        if keyword in ("oneOf", "anyOf") and error.context:
            title = error.schema.get("title") or "enum"
            closest = self._messages(self._closest_branch(error)[0], root)[0]
            return [f"{where}: data did not match any variant of {title} ({closest})"]
        return [f"{where}: {error.message}"]

    def _closest_branch(self, error: ValidationError) -> list[ValidationError]:
        """The errors of the union branch ``error.instance`` came closest to: the one its
        ``type`` tag names, else the one with the fewest errors (the first of equals)."""
        by_branch: dict[int, list[ValidationError]] = {}
        for sub in error.context:
            by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)
        branches = error.validator_value
        best = max(by_branch, key=lambda index: (
            self._tag_matches(branches[index], error.instance), -len(by_branch[index])))
        return by_branch[best]

    def _tag_matches(self, schema: Any, value: Any) -> bool:
        """True when ``value`` is an object whose ``type`` tag selects this branch."""
        if not isinstance(value, dict) or "type" not in value:
            return False
        tag = self._resolve(schema).get("properties", {}).get("type", {})
        return isinstance(tag, dict) and value["type"] in tag.get("enum", ())

    # ------------------------------------------------------------ fields codex would drop

    def _resolve(self, schema: Any) -> Any:
        while isinstance(schema, dict) and "$ref" in schema:
            schema = self._resolver.lookup(schema["$ref"]).contents
        return schema

    def _fits(self, schema: Any, value: Any) -> bool:
        return bool(self._validator.evolve(schema=schema).is_valid(value))

    def _ignored(self, schema: Any, value: Any, path: str) -> list[str]:
        found: list[str] = []
        declared = self._declared(schema, value, path, found)
        if isinstance(value, dict) and declared is not None:
            found.extend(f"{path}.{key}" for key in value if key not in declared)
        return found

    def _declared(self, schema: Any, value: Any, path: str, found: list[str]) -> set[str] | None:
        """Walk one schema node over ``value``: add the ignored fields found below it to
        ``found``, and return the keys the node declares for an object ``value`` (``None``: it
        says nothing about keys) — with its ``allOf`` parts and the first union branch ``value``
        fits. An object with ``additionalProperties`` declares every key: an unknown one is
        used, or rejected, never silently dropped."""
        schema = self._resolve(schema)
        if not isinstance(schema, dict):
            return None  # the schema `true`: anything goes
        parts = [self._declared(sub, value, path, found) for sub in schema.get("allOf", ())]
        for key in ("oneOf", "anyOf"):
            branch = next((b for b in schema.get(key, ()) if self._fits(b, value)), None)
            if branch is not None:
                parts.append(self._declared(branch, value, path, found))
        if isinstance(value, list) and isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                found.extend(self._ignored(schema["items"], item, f"{path}[{index}]"))
        if isinstance(value, dict) and _OBJECT_KEYWORDS & schema.keys():
            props: JsonObject = schema.get("properties", {})
            extra = schema.get("additionalProperties")
            for name, item in value.items():
                sub = props.get(name, extra if isinstance(extra, dict) else None)
                if sub is not None:
                    found.extend(self._ignored(sub, item, f"{path}.{name}"))
            parts.append(set(value) if "additionalProperties" in schema else set(props))
        named = [part for part in parts if part is not None]
        return set().union(*named) if named else None


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
