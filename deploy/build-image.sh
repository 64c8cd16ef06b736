#!/usr/bin/env bash
# Build the toolscout image (deploy/Dockerfile) with docker, podman or buildah, whichever is here.
#
#   deploy/build-image.sh [-t TAG] [--extras EXTRAS] [--base IMAGE] [--engine docker|podman|buildah]
#
#   -t, --tag TAG       image name (default toolscout/toolscout:<version>)
#   --extras EXTRAS     optional extras of the toolscout package, e.g. "embeddings" (hybrid search)
#   --base IMAGE        the Python base image (build argument PYTHON_IMAGE), e.g. a mirror's copy
#                       of python:3.11.14-slim-bookworm where Docker Hub is out of reach
#   --engine ENGINE     use this engine instead of the first that works: docker (when its daemon
#                       answers), then podman, then buildah
#
# buildah runs with `--storage-driver vfs --isolation chroot` (no daemon, no overlay mounts, no
# user namespaces: works inside containers and CI sandboxes); BUILDAH_ROOT / BUILDAH_RUNROOT move
# its storage. Extra arguments after `--` go to the engine's build command.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' clients/src/toolscout/client/_version.py)
tag="toolscout/toolscout:${version}"
extras=""
base=""
engine=""
while [ $# -gt 0 ]; do
    case "$1" in
        -t|--tag) tag="$2"; shift 2 ;;
        --extras) extras="$2"; shift 2 ;;
        --base) base="$2"; shift 2 ;;
        --engine) engine="$2"; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-image.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

if [ -z "$engine" ]; then
    if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        engine=docker
    elif command -v podman >/dev/null 2>&1; then
        engine=podman
    elif command -v buildah >/dev/null 2>&1; then
        engine=buildah
    else
        echo "build-image.sh: no container engine: install docker (with its daemon running), podman or buildah" \
             "(Debian: apt-get install buildah)" >&2
        exit 1
    fi
fi

build_args=(--build-arg "EXTRAS=${extras}")
if [ -n "$base" ]; then
    build_args+=(--build-arg "PYTHON_IMAGE=${base}")
fi
ignore=deploy/Dockerfile.dockerignore

echo "build-image.sh: building ${tag} with ${engine}${extras:+ (extras: ${extras})}${base:+ on ${base}}" >&2
case "$engine" in
    docker)
        # BuildKit reads deploy/Dockerfile.dockerignore next to the Dockerfile by itself.
        exec docker build -f deploy/Dockerfile -t "$tag" "${build_args[@]}" "$@" . ;;
    podman)
        exec podman build -f deploy/Dockerfile -t "$tag" --ignorefile "$ignore" "${build_args[@]}" "$@" . ;;
    buildah)
        storage=(--storage-driver vfs)
        if [ -n "${BUILDAH_ROOT:-}" ]; then storage+=(--root "$BUILDAH_ROOT"); fi
        if [ -n "${BUILDAH_RUNROOT:-}" ]; then storage+=(--runroot "$BUILDAH_RUNROOT"); fi
        exec buildah "${storage[@]}" bud --isolation chroot -f deploy/Dockerfile -t "$tag" \
            --ignorefile "$ignore" "${build_args[@]}" "$@" . ;;
    *)
        echo "build-image.sh: unknown engine '$engine' (docker, podman or buildah)" >&2
        exit 2 ;;
esac
