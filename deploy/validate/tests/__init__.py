"""Selftest of the deploy checkers: `python -m unittest discover -s tests -t .` from
deploy/validate (run-checks.sh selftest)."""
