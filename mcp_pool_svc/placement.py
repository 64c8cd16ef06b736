"""Which pool shard runs which MCP server.

The pool is split into ``N`` shards (``N`` pool processes, ``toolscout.pool.shards.count``). Each
configured server has a placement:

* ``owner`` (the default): exactly one shard runs it, chosen by rendezvous (highest-random-weight)
  hashing of the server name over the shards;
* ``shard: K``: pinned to shard ``K`` (a stateful server that must not move when ``N`` changes);
* ``placement: all``: every shard runs it (stateless servers, for throughput).

Rendezvous hashing gives every (server, shard) pair a weight and the heaviest shard wins. Going
from ``N`` to ``N + 1`` shards therefore moves a server only when the new shard outweighs its old
owner, about ``1 / (N + 1)`` of them, and all of those move to the new shard; shrinking moves only
the removed shards' servers. The weight is defined exactly so that any other package or language
computes the same owners::

    weight(name, k) = int.from_bytes(blake2b(utf8(name) + b"\\x00" + ascii(str(k)), digest_size=8), "big")
    owner(name, N)  = the k in 0..N-1 with the largest weight (the smallest k on a tie)

Python's ``hash()`` is salted per process and would give every process different owners. The rule
itself (:func:`~toolscout.client.owners_of`, :class:`~toolscout.client.Placement`) is in the client
library, which routes calls with it; the pool runs its servers by the same class (built from the
config by :func:`toolscout_kit.shards.placement_for`). This module is the pool's side: which shard
this process is. :class:`ShardIdentity` itself, the value ``toolscout up`` also starts pool shards
with, is the kit's (:mod:`toolscout_kit.shards`).
"""

from __future__ import annotations

from toolscout_kit.config import ShardSettings
from toolscout_kit.errors import ConfigError
from toolscout_kit.shards import ShardIdentity

__all__ = ["ShardIdentity", "resolve_identity"]


def resolve_identity(
    shards: ShardSettings, *, spec: str | None = None, pod_name: str | None = None
) -> ShardIdentity:
    """This process's shard: ``--shard K/N`` first, else the pod name, else ``0/1`` when unsharded.

    The configured count is the one truth every service shares (discovery reads it to follow every
    shard), so an ``N`` that disagrees with it is an error rather than an override.

    Raises:
        ConfigError: the spec or pod name is malformed or disagrees with ``toolscout.pool.shards``,
            or the pool is sharded and neither was given.
    """
    if spec is not None:
        identity = ShardIdentity.parse(spec)
        if identity.count != shards.count:
            raise ConfigError(
                f"--shard {spec}: {identity.count} shards, but toolscout.pool.shards.count is {shards.count}"
            )
        return identity
    if pod_name:
        return ShardIdentity.from_pod_name(pod_name, shards.statefulset, shards.count)
    if shards.count == 1:
        return ShardIdentity(0, 1)
    raise ConfigError(
        f"toolscout.pool.shards.count is {shards.count} but this pool process has no shard: "
        f"pass --shard K/{shards.count} or run it as a pod named {shards.statefulset}-<K>"
    )
