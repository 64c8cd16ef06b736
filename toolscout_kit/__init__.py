"""Shared plumbing of the three toolscout services: config, errors, logging, metrics, server, channels."""

# Before any module of the kit imports grpc: the client library's root sets gRPC's defaults.
import toolscout  # noqa: F401
