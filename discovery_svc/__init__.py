"""toolscout's discovery service: partitions a toolset's tools into loaded and deferred, writes the
manifest, and searches (BM25, or hybrid with dense embeddings).

Its public surface, besides ``discovery_svc.server.build_server``, is what a launcher such as
``toolscout up`` asks of it: :func:`check_search` (can this config's search be served here? run
before anything starts) and :func:`active_search_mode` (which ranking a running discovery answers
with now, read from its metrics registry). Both are discovery's own rules — the embedder check
needs discovery's embedders, which the kit below the services must not import — so the service
publishes them rather than the kit owning a copy.
"""

from discovery_svc.hybrid_stage import check_search
from discovery_svc.metrics import active_search_mode

__all__ = ["active_search_mode", "check_search"]
