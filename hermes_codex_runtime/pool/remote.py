"""Connecting to an app-server someone else runs (``codex app-server --listen ws://…``).

Owns :func:`connect_endpoint`: read the token (a file, as codex's ``--ws-token-file`` takes it),
open the endpoint (:mod:`hermes_codex_runtime.wire.websocket`), and complete the same
``initialize`` handshake as for a local process. Failures are
:class:`~hermes_codex_runtime.wire.websocket.EndpointError` with a kind (``auth``, ``refused``,
``tls``, …) the host turns into advice naming its own setting.
"""

from __future__ import annotations

import logging
import os
import stat

from hermes_codex_runtime.pool.placement import EndpointSpec
from hermes_codex_runtime.wire import AppServerConnection, SpawnOptions, WireError
from hermes_codex_runtime.wire.websocket import Endpoint, EndpointError
from hermes_codex_runtime.wire.websocket import connect_endpoint as open_endpoint

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0
_warned: set[str] = set()


def exposed_token_file(path: str) -> str | None:
    """Why the token file at ``path`` is readable by others (group/world bits, as ssh refuses
    for a key file), or ``None`` when only its owner can read it."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None
    if not mode & 0o077:
        return None
    return (f"the token file {path} is readable by other users (mode {mode:04o}): anyone who "
            f"can read it can use the app-server. Run `chmod 600 {path}`.")


def read_token(spec: EndpointSpec) -> str | None:
    """The capability token for ``spec`` (file first, then the named environment variable). A
    token file others can read is used, with a warning (once per file and process)."""
    if spec.token_file:
        exposed = exposed_token_file(spec.token_file)
        if exposed and spec.token_file not in _warned:
            _warned.add(spec.token_file)
            log.warning("%s", exposed)
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
