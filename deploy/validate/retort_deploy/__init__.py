"""Offline checks of retort's deploy/ folder: Kubernetes manifests, job specs, Dockerfiles.

Pure functions that return lists of error messages; the check_*.py scripts beside this package
print them and set the exit status.
"""
