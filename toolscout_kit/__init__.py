"""Shared plumbing of the three toolscout services: config, errors, logging, metrics, server, channels."""
