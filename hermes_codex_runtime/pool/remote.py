"""Connecting to an app-server someone else runs (``codex app-server --listen ws://…``).

Owns :func:`connect_endpoint`: read the token (a file, as codex's ``--ws-token-file`` takes it),
open the endpoint (:mod:`hermes_codex_runtime.wire.websocket`), and complete the same
``initialize`` handshake as for a local process. Failures are
:class:`~hermes_codex_runtime.wire.websocket.EndpointError` with a kind (``auth``, ``refused``,
``tls``, …) the host turns into advice naming its own setting.
"""

from __future__ import annotations

import os

from hermes_codex_runtime.pool.placement import EndpointSpec
from hermes_codex_runtime.wire import AppServerConnection, SpawnOptions, WireError
from hermes_codex_runtime.wire.websocket import Endpoint, EndpointError
from hermes_codex_runtime.wire.websocket import connect_endpoint as open_endpoint

CONNECT_TIMEOUT = 10.0


def read_token(spec: EndpointSpec) -> str | None:
    """The capability token for ``spec`` (file first, then the named environment variable)."""
    if spec.token_file:
        try:
            with open(spec.token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise EndpointError(
                "auth", f"cannot read the token file {spec.token_file} for {spec.url} "
                f"({exc.strerror or exc})",
                "Point the token file setting at the file holding the app-server's token.",
            ) from exc
        if not token:
            raise EndpointError("auth", f"the token file {spec.token_file} for {spec.url} is "
                                "empty", "Write the app-server's capability token into it.")
        return token
    if spec.token_env:
        return os.environ.get(spec.token_env) or None
    return None


def connect_endpoint(spec: EndpointSpec, options: SpawnOptions) -> AppServerConnection:
    """A connection to the app-server at ``spec``, initialised. Raises :class:`EndpointError`
    (or another :class:`~hermes_codex_runtime.wire.WireError`); never leaves a socket open."""
    endpoint = Endpoint.parse(spec.url)
    token = read_token(spec)
    timeout = min(CONNECT_TIMEOUT, options.initialize_timeout)
    pipe = open_endpoint(endpoint, token=token, timeout=timeout, token_file=spec.token_file)
    conn = AppServerConnection(pipe=pipe, endpoint=spec.url)
    try:
        conn.initialize(timeout=options.initialize_timeout,
                        client_version=options.client_version,
                        client_title=options.client_title,
                        opt_out_notifications=options.opt_out_notifications,
                        experimental_api=options.experimental_api)
    except WireError as exc:
        conn.close()
        if isinstance(exc, EndpointError):
            raise
        raise EndpointError("handshake", f"the app-server at {endpoint.redacted()} did not "
                            f"complete the codex handshake ({exc})",
                            "Check that the URL names a `codex app-server --listen` "
                            "endpoint.") from exc
    except BaseException:
        conn.close()
        raise
    return conn
