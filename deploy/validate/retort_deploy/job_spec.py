"""The job spec of a manifest, checked by the coordinator itself: its rules (fields, types,
ranges, defaults and cross-field rules of coordinator/job_spec.h) exist once, in C++, and
`retort-coordinator --check-job=- --json --no-check-paths` applies them here (paths are the
pods' and need not exist on this host). What only a deployment needs is added: the checkpoint
directory must be written (on storage shared by all pods)."""
import json
import subprocess

CHECK_TIMEOUT_S = 30


class JobSpecChecker:
    """Checks job spec texts with one retort-coordinator binary."""

    def __init__(self, coordinator):
        self.coordinator = str(coordinator)

    def verdict(self, text):
        """The coordinator's {"valid": bool, "job": {...} | "error": "..."} for a spec text."""
        try:
            done = subprocess.run(
                [self.coordinator, "--check-job=-", "--json", "--no-check-paths"],
                input=text, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return {"valid": False, "error": f"{self.coordinator} --check-job: {error}"}
        try:
            return json.loads(done.stdout)
        except json.JSONDecodeError:
            output = (done.stderr or done.stdout).strip()
            return {"valid": False,
                    "error": f"{self.coordinator} --check-job exited {done.returncode}: {output}"}

    def check(self, text, spec):
        """Error messages for a spec's text (empty when valid); `spec` is its parsed mapping."""
        verdict = self.verdict(text)
        if not verdict.get("valid"):
            return [str(verdict.get("error", "invalid")).removeprefix("<stdin>: ")]
        if not ((spec or {}).get("checkpoint") or {}).get("dir"):
            return ["checkpoint.dir: required (on storage shared by all pods)"]
        return []
