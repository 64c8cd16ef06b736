"""Deployment assets (Kubernetes, Prometheus, Grafana) and their checks: see deploy/README.md."""
