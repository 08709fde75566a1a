"""The pieces run_manifests.py builds pods from (retort_deploy/pod_templates.py and
pod_volumes.py), without processes or namespaces: the kubelet's $(VAR) expansion, what the Job
controller gives an Indexed Job's pods, and the rewriting of paths under mounts."""
import unittest

from retort_deploy.pod_templates import PodTemplateError, command_line, container_env, expand, pods_of_job
from retort_deploy.pod_volumes import PodVolumes

from .fakes import temp_dir

INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def worker_job(parallelism=3):
    container = {
        "name": "worker",
        "command": ["/opt/retort/bin/retort-worker"],
        "args": ["--local-rank=$(POD_INDEX)", "--x=$(JOB_COMPLETION_INDEX)", "--out=/tmp/o", "--ns=$(NS)"],
        "env": [{"name": "POD_INDEX", "valueFrom": {"fieldRef": {"fieldPath": INDEX_FIELD}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "shared", "mountPath": "/var/lib/s"}],
    }
    return {"kind": "Job", "metadata": {"name": "retort-worker"},
            "spec": {"completionMode": "Indexed", "parallelism": parallelism, "completions": parallelism,
                     "template": {"metadata": {"labels": {"app": "w"}},
                                  "spec": {"subdomain": "retort-worker", "containers": [container],
                                           "volumes": [{"name": "tmp", "emptyDir": {}},
                                                       {"name": "shared", "persistentVolumeClaim": {"claimName": "s"}}]}}}}


class PodTemplateTest(unittest.TestCase):
    def test_expansion_follows_the_kubelet(self):
        self.assertEqual(expand("$(A)-$$(A)-$(B)-$", {"A": "1"}), "1-$(A)-$(B)-$")

    def test_an_indexed_job_gives_each_pod_its_completion_index(self):
        pods = pods_of_job(worker_job(), "retort")
        self.assertEqual([p.name for p in pods], ["retort-worker-0", "retort-worker-1", "retort-worker-2"])
        self.assertEqual(pods[2].hostname, "retort-worker-2")
        container = pods[2].spec["containers"][0]
        env = container_env(pods[2], container, {})
        self.assertEqual(command_line(container, env)[1:],
                         ["--local-rank=2", "--x=2", "--out=/tmp/o", "--ns=retort"])

    def test_a_secret_in_env_is_refused(self):
        pod = pods_of_job(worker_job(1), "retort")[0]
        container = {"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
        with self.assertRaisesRegex(PodTemplateError, "env T comes from an unsupported source"):
            container_env(pod, container, {})


class PodVolumesTest(unittest.TestCase):
    def test_paths_under_mounts_move_once_and_claims_are_shared(self):
        root = temp_dir(self, "retort-pod-volumes-")
        pods = pods_of_job(worker_job(2), "retort")
        volumes = [PodVolumes(p, p.spec["containers"][0], str(root), {}, {}) for p in pods]
        shared = f"{root}/claims/s"
        self.assertEqual(volumes[0].rewrite("--dir=/var/lib/s/ckpt"), f"--dir={shared}/ckpt")
        self.assertEqual(volumes[1].rewrite("dir: /var/lib/s"), f"dir: {shared}")
        # The claim's folder is under /tmp (a mount too): rewritten once, not twice.
        self.assertEqual(volumes[0].rewrite("/tmp/x /var/lib/s"), f"{root}/pods/retort-worker-0/tmp/x {shared}")
        self.assertEqual(volumes[0].rewrite("/tmpfoo /var/lib/sx /usr/tmp"), "/tmpfoo /var/lib/sx /usr/tmp")


if __name__ == "__main__":
    unittest.main()
