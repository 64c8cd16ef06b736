"""A port held by an outgoing connection (nothing listening) is told apart from a server on it, and
tried again briefly: the default ports lie in Linux's ephemeral range (issue 30, item 8)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from toolscout_kit.errors import ConfigError
from toolscout_kit.preflight import Endpoint, check_free


@contextmanager
def _outgoing_connection() -> Iterator[tuple[int, threading.Event]]:
    """An established connection to a throwaway listener: its local port is held, nothing listens
    there. Setting the event ends it (the peer closes first, so the local port is left free)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        end = threading.Event()

        def close() -> None:
            end.wait()
            accepted.close()
            client.recv(1)  # the peer's FIN
            client.close()

        closer = threading.Thread(target=close)
        closer.start()
        try:
            yield client.getsockname()[1], end
        finally:
            end.set()
            closer.join(10)


def test_a_port_held_by_an_outgoing_connection_is_refused_saying_so() -> None:
    with _outgoing_connection() as (port, _), pytest.raises(ConfigError) as refused:
        check_free([Endpoint("gateway HTTP", "127.0.0.1", port)])
    assert (
        f"cannot listen on 127.0.0.1:{port} (gateway HTTP): address already in use by a short-lived connection"
        in (refused.value.message)
    )
    assert "ephemeral range" in refused.value.message


def test_a_port_whose_outgoing_connection_ends_meanwhile_is_free() -> None:
    with _outgoing_connection() as (port, end):
        threading.Timer(0.3, end.set).start()
        check_free([Endpoint("gateway HTTP", "127.0.0.1", port)])


def test_a_port_a_server_listens_on_is_refused_at_once_as_before() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        with pytest.raises(ConfigError) as refused:
            check_free([Endpoint("pool gRPC", "127.0.0.1", port)])
    assert (
        refused.value.message.splitlines()[0]
        == f"cannot listen on 127.0.0.1:{port} (pool gRPC): address already in use"
    )
