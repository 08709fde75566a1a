"""A pod's volume mounts, emulated as folders on this machine, and the rewriting of paths under
them (arguments, env values, ConfigMap files) to those folders.

- persistentVolumeClaim: one folder per claim name, shared by every pod that mounts it (as a
  ReadWriteMany volume is), under ROOT/claims/.
- configMap: the ConfigMap's keys as files (their text rewritten with this pod's mounts, so a
  job spec naming /var/lib/retort/shared/... names the emulated claim), ROOT/pods/POD/VOLUME.
- secret: the files a test supplies for that Secret (by name), copied with the volume's
  defaultMode; a missing optional Secret is an empty folder, a missing required one an error.
- emptyDir: an empty folder per pod.
Other volume types, subPath and a read-only claim that is written are not emulated (an error
for the first two; the last is not detected).
"""
import os
import re
import shutil

from .manifests import dig, items
from .pod_templates import PodTemplateError


class PodVolumes:
    """The mounts of one container of one pod; see the module doc."""

    def __init__(self, pod, container, root, config_maps, secrets):
        """`config_maps`: name -> data; `secrets`: name -> {file name: source path}."""
        self.mounts = []  # (mount path, folder), longest mount path first
        volumes = {v.get("name"): v for v in items(pod.spec.get("volumes"))}
        pending_config_maps = []
        for mount in items(container.get("volumeMounts")):
            if mount.get("subPath") or mount.get("subPathExpr"):
                raise PodTemplateError(f"pod {pod.name}: subPath mounts are not emulated")
            volume = volumes.get(mount.get("name"))
            if volume is None:
                raise PodTemplateError(f"pod {pod.name}: mount {mount.get('mountPath')} names no volume")
            folder = self._folder(pod, volume, root, secrets)
            self.mounts.append((str(mount["mountPath"]).rstrip("/") or "/", folder))
            if "configMap" in volume:
                pending_config_maps.append((volume, folder))
        self.mounts.sort(key=lambda m: len(m[0]), reverse=True)
        for volume, folder in pending_config_maps:
            name = dig(volume, "configMap", "name")
            if name not in config_maps:
                raise PodTemplateError(f"pod {pod.name}: ConfigMap {name} is not in the manifests")
            for key, text in config_maps[name].items():
                with open(os.path.join(folder, key), "w", encoding="utf-8") as f:
                    f.write(self.rewrite(str(text)))

    @staticmethod
    def _folder(pod, volume, root, secrets):
        name = volume.get("name")
        if "persistentVolumeClaim" in volume:
            folder = os.path.join(root, "claims", dig(volume, "persistentVolumeClaim", "claimName"))
        else:
            folder = os.path.join(root, "pods", pod.name, name)
        os.makedirs(folder, exist_ok=True)
        if "secret" in volume:
            secret = dig(volume, "secret", "secretName")
            files = secrets.get(secret)
            if files is None and dig(volume, "secret", "optional") is not True:
                raise PodTemplateError(f"pod {pod.name}: required Secret {secret} was not supplied")
            mode = dig(volume, "secret", "defaultMode", default=0o644)
            for file_name, source in (files or {}).items():
                shutil.copyfile(source, os.path.join(folder, file_name))
                os.chmod(os.path.join(folder, file_name), mode)
        elif not any(k in volume for k in ("persistentVolumeClaim", "configMap", "emptyDir")):
            raise PodTemplateError(f"pod {pod.name}: volume {name} is of a type not emulated")
        return folder

    def rewrite(self, text):
        """`text` with every path under a mount path (at a path boundary) moved to its folder,
        in one pass (a folder is never rewritten again; the longest mount path wins)."""
        if not self.mounts:
            return text
        folders = dict(self.mounts)
        alternatives = "|".join(re.escape(m) for m, _ in self.mounts)
        pattern = r"(?<![\w./-])(" + alternatives + r")(?=/|$|[\s:,;\"'])"
        return re.sub(pattern, lambda match: folders[match.group(1)], text, flags=re.M)

    def host_path(self, path):
        """The folder-side path of a path inside the pod (unchanged when under no mount)."""
        return self.rewrite(path)
