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
this process is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolscout_kit.config import ShardSettings
from toolscout_kit.errors import ConfigError

__all__ = ["ShardIdentity", "resolve_identity"]

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class ShardIdentity:
    """This pool process's shard: ``index`` of ``count`` (``str()`` gives ``"K/N"``)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count} does not exist: need 0 <= K < N and N >= 1")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, spec: str) -> ShardIdentity:
        """``"K/N"`` (as given to ``--shard``).

        Raises:
            ConfigError: not of the form ``K/N`` with ``0 <= K < N``.
        """
        match = _SPEC.match(spec)
        if match is None:
            raise ConfigError(f"--shard {spec!r}: expected K/N, e.g. 0/3 for the first of three shards")
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1 or index >= count:
            raise ConfigError(f"--shard {spec!r}: shard {index} does not exist among {count} (0 <= K < N)")
        return cls(index, count)

    @classmethod
    def from_pod_name(cls, pod_name: str, statefulset: str, count: int) -> ShardIdentity:
        """The shard of a StatefulSet pod: ``<statefulset>-<K>`` is shard ``K`` of ``count``.

        Raises:
            ConfigError: the pod name is not ``<statefulset>-<K>``, or ``K`` is not below ``count``.
        """
        prefix = f"{statefulset}-"
        ordinal = pod_name.removeprefix(prefix)
        if not pod_name.startswith(prefix) or not ordinal.isdigit():
            raise ConfigError(
                f"pod name {pod_name!r} is not a pod of the StatefulSet {statefulset!r} "
                f"(expected {statefulset}-<ordinal>; see toolscout.pool.shards.statefulset)"
            )
        index = int(ordinal)
        if index >= count:
            raise ConfigError(
                f"pod {pod_name!r} is shard {index} but toolscout.pool.shards.count is {count}: "
                "scale the StatefulSet and the count together"
            )
        return cls(index, count)


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
