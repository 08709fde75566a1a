// retort's deployment rules, checked on rendered manifests (one overlay). Each rule returns
// messages naming the object and what is wrong; an empty list means the overlay complies.
import { parse as parseYaml } from "yaml";
import { containersOf, describe, podSpecOf } from "./manifests.mjs";
import { checkJobSpec } from "./job_spec.mjs";

const COORDINATOR = "retort-coordinator";
const WORKER = "retort-worker";

function find(objects, kind, name) {
  return objects.find((o) => o.kind === kind && o.metadata?.name === name);
}

function selects(selector, labels) {
  return Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v) &&
    Object.keys(selector ?? {}).length > 0;
}

// Value of `--name=value` in a container's args, or undefined.
export function flagValue(container, name) {
  const prefix = `--${name}=`;
  const arg = (container.args ?? []).find((a) => a.startsWith(prefix));
  return arg === undefined ? undefined : arg.slice(prefix.length);
}

function envEntry(container, name) {
  return (container.env ?? []).find((e) => e.name === name);
}

function checkContainerSecurity(objects, errors) {
  for (const object of objects) {
    const spec = podSpecOf(object);
    if (spec === null) continue;
    const name = describe(object);
    if (spec.automountServiceAccountToken !== false) errors.push(`${name}: automountServiceAccountToken must be false`);
    if (spec.securityContext?.seccompProfile?.type !== "RuntimeDefault") {
      errors.push(`${name}: pod securityContext.seccompProfile.type must be RuntimeDefault`);
    }
    if (!(spec.securityContext?.runAsUser > 0)) errors.push(`${name}: pod securityContext.runAsUser must be non-zero`);
    for (const { container } of containersOf(object)) {
      const where = `${name} container ${container.name}`;
      const sc = container.securityContext ?? {};
      if ((sc.runAsNonRoot ?? spec.securityContext?.runAsNonRoot) !== true) errors.push(`${where}: runAsNonRoot must be true`);
      if (sc.allowPrivilegeEscalation !== false) errors.push(`${where}: allowPrivilegeEscalation must be false`);
      if (sc.readOnlyRootFilesystem !== true) errors.push(`${where}: readOnlyRootFilesystem must be true`);
      if (!(sc.capabilities?.drop ?? []).includes("ALL")) errors.push(`${where}: capabilities must drop ALL`);
      for (const kind of ["requests", "limits"]) {
        for (const resource of ["cpu", "memory"]) {
          if (container.resources?.[kind]?.[resource] === undefined) errors.push(`${where}: resources.${kind}.${resource} missing`);
        }
      }
      const image = container.image ?? "";
      if (!/^[^:@\s]+(:[\w.-]+|@sha256:[0-9a-f]{64})$/.test(image.replace(/^[^/]+\.[^/]+\//, "x/"))) {
        errors.push(`${where}: image "${image}" must carry a tag or digest (set by the overlay)`);
      }
      const ports = new Set((container.ports ?? []).map((p) => p.containerPort));
      for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
        const port = container[probe]?.grpc?.port;
        if (port === undefined) errors.push(`${where}: ${probe} must be a native grpc probe`);
        else if (!ports.has(port)) errors.push(`${where}: ${probe} port ${port} is not a declared containerPort`);
      }
      // Kubernetes expands $(VAR) in command/args only for variables defined in env.
      for (const arg of [...(container.command ?? []), ...(container.args ?? [])]) {
        for (const m of arg.matchAll(/\$\((\w+)\)/g)) {
          if (envEntry(container, m[1]) === undefined) errors.push(`${where}: "${arg}" uses $(${m[1]}) but env has no ${m[1]}`);
        }
      }
      for (const e of container.env ?? []) {
        if (e.valueFrom?.secretKeyRef) errors.push(`${where}: env ${e.name} comes from a Secret; mount secrets as files`);
      }
    }
  }
  for (const object of objects) {
    if (object.kind === "Secret") errors.push(`${describe(object)}: secrets are created by the operator, never committed`);
  }
}

// Every PVC, ConfigMap and Secret volume a pod uses; PVCs and ConfigMaps must be rendered too.
function checkVolumeReferences(objects, errors) {
  for (const object of objects) {
    const spec = podSpecOf(object);
    if (spec === null) continue;
    const volumes = new Set((spec.volumes ?? []).map((v) => v.name));
    for (const v of spec.volumes ?? []) {
      if (v.persistentVolumeClaim && !find(objects, "PersistentVolumeClaim", v.persistentVolumeClaim.claimName)) {
        errors.push(`${describe(object)}: volume ${v.name} claims missing PVC ${v.persistentVolumeClaim.claimName}`);
      }
      if (v.configMap && !find(objects, "ConfigMap", v.configMap.name)) {
        errors.push(`${describe(object)}: volume ${v.name} uses missing ConfigMap ${v.configMap.name}`);
      }
      if (v.secret && v.secret.optional !== true) {
        errors.push(`${describe(object)}: secret volume ${v.name} must be optional (created by the operator)`);
      }
    }
    for (const { container } of containersOf(object)) {
      for (const m of container.volumeMounts ?? []) {
        if (!volumes.has(m.name)) errors.push(`${describe(object)}: mount ${m.mountPath} names missing volume ${m.name}`);
      }
    }
  }
}

// The PVC mounted at the longest mount path that contains `file`, for a pod, or null.
function claimHolding(object, file) {
  const spec = podSpecOf(object);
  let best = null;
  for (const { container } of containersOf(object)) {
    for (const m of container.volumeMounts ?? []) {
      const dir = m.mountPath.replace(/\/$/, "");
      if ((file === dir || file.startsWith(`${dir}/`)) && (best === null || dir.length > best.dir.length)) {
        const volume = (spec.volumes ?? []).find((v) => v.name === m.name);
        best = { dir, volume, readOnly: m.readOnly === true };
      }
    }
  }
  return best;
}

function checkCoordinator(objects, errors, context) {
  const deployment = find(objects, "Deployment", COORDINATOR);
  if (!deployment) return errors.push(`Deployment/${COORDINATOR} missing`);
  if (deployment.spec.replicas !== 1) errors.push(`${describe(deployment)}: replicas must be 1`);
  if (deployment.spec.strategy?.type !== "Recreate") errors.push(`${describe(deployment)}: strategy must be Recreate`);
  const container = deployment.spec.template.spec.containers[0];
  const service = find(objects, "Service", COORDINATOR);
  if (!service) return errors.push(`Service/${COORDINATOR} missing`);
  if (!selects(service.spec.selector, deployment.spec.template.metadata.labels)) {
    errors.push(`${describe(service)}: selector does not select the coordinator pods`);
  }
  const listen = flagValue(container, "listen") ?? "";
  const port = Number(listen.split(":").pop());
  const servicePort = service.spec.ports.find((p) => p.name === "grpc");
  if (!servicePort) errors.push(`${describe(service)}: needs a port named grpc`);
  else if (servicePort.port !== 7070) errors.push(`${describe(service)}: gRPC port must be 7070`);
  const containerPort = (container.ports ?? []).find((p) => p.name === servicePort?.targetPort || p.containerPort === servicePort?.targetPort);
  if (!containerPort || containerPort.containerPort !== port) {
    errors.push(`${describe(service)}: targetPort does not reach --listen=${listen}`);
  }
  const state = claimHolding(deployment, flagValue(container, "state-dir") ?? "");
  if (!state?.volume?.persistentVolumeClaim || state.readOnly) {
    errors.push(`${describe(deployment)}: --state-dir must be on a writable PersistentVolumeClaim`);
  }
  const jobPath = flagValue(container, "job") ?? "";
  const jobMount = claimHolding(deployment, jobPath);
  const configMap = jobMount?.volume?.configMap && find(objects, "ConfigMap", jobMount.volume.configMap.name);
  const key = jobPath.slice((jobMount?.dir.length ?? 0) + 1);
  if (!configMap || configMap.data?.[key] === undefined) {
    errors.push(`${describe(deployment)}: --job=${jobPath} is not a key of a mounted ConfigMap`);
  } else {
    context.jobSpec = parseYaml(configMap.data[key]);
    context.coordinator = { deployment, container, service, port };
  }
}

function checkWorkers(objects, errors, context) {
  const set = find(objects, "StatefulSet", WORKER);
  if (!set) return errors.push(`StatefulSet/${WORKER} missing`);
  const name = describe(set);
  const pod = set.spec.template;
  const headless = find(objects, "Service", set.spec.serviceName);
  if (!headless || headless.spec.clusterIP !== "None") errors.push(`${name}: serviceName must name a headless Service`);
  else if (!selects(headless.spec.selector, pod.metadata.labels)) errors.push(`${describe(headless)}: selector does not select the workers`);
  if (!(pod.spec.terminationGracePeriodSeconds >= 60)) {
    errors.push(`${name}: terminationGracePeriodSeconds must be >= 60 (SIGTERM drains at a step boundary)`);
  }
  const budget = objects.find((o) => o.kind === "PodDisruptionBudget" && selects(o.spec.selector?.matchLabels, pod.metadata.labels));
  if (!budget || budget.spec.maxUnavailable !== 1) {
    errors.push(`${name}: needs a PodDisruptionBudget with maxUnavailable 1 (drains evict one worker at a time)`);
  }
  const container = pod.spec.containers[0];
  const fieldOf = (flag) => {
    const m = /^\$\((\w+)\)$/.exec(flagValue(container, flag) ?? "");
    return m ? envEntry(container, m[1])?.valueFrom?.fieldRef?.fieldPath : undefined;
  };
  if (fieldOf("node") !== "spec.nodeName") errors.push(`${name}: --node must come from spec.nodeName`);
  if (fieldOf("data-address") !== "status.podIP") errors.push(`${name}: --data-address must come from status.podIP`);
  const coordinator = context.coordinator;
  if (coordinator) {
    const address = flagValue(container, "coordinator") ?? "";
    const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.split(":").pop())];
    const dns = new RegExp(`^${coordinator.service.metadata.name}(\\.\\$\\(POD_NAMESPACE\\)\\.svc(\\.cluster\\.local)?)?$`);
    if (!dns.test(host) || port !== coordinator.service.spec.ports[0].port) {
      errors.push(`${name}: --coordinator=${address} is not the coordinator Service's DNS name and port`);
    }
  }
  const health = Number((flagValue(container, "health-listen") ?? "").split(":").pop());
  if (container.readinessProbe?.grpc?.port !== health) errors.push(`${name}: probes must target --health-listen`);
  const jobSpec = context.jobSpec;
  if (jobSpec?.elastic) {
    const replicas = set.spec.replicas;
    if (replicas < jobSpec.elastic.min_workers || replicas > jobSpec.elastic.max_workers) {
      errors.push(`${name}: replicas ${replicas} outside the job's elastic bounds`);
    }
  }
  context.workers = set;
}

// Checkpoint and output directories: one ReadWriteMany claim, writable by coordinator and workers.
function checkSharedStorage(objects, errors, context) {
  const { jobSpec, coordinator, workers } = context;
  if (!jobSpec || !coordinator || !workers) return;
  for (const [what, dir] of [["checkpoint.dir", jobSpec.checkpoint?.dir], ["output_dir", jobSpec.output_dir]]) {
    if (!dir) continue;
    const claims = [coordinator.deployment, workers].map((o) => claimHolding(o, dir));
    const names = claims.map((c) => c?.volume?.persistentVolumeClaim?.claimName);
    if (names.some((n) => n === undefined) || names[0] !== names[1] || claims.some((c) => c.readOnly)) {
      errors.push(`job ${what}=${dir}: must be on one writable PVC mounted by coordinator and workers`);
      continue;
    }
    const pvc = find(objects, "PersistentVolumeClaim", names[0]);
    if (!pvc?.spec.accessModes.includes("ReadWriteMany")) errors.push(`${describe(pvc)}: must be ReadWriteMany (holds ${what})`);
  }
  const checkpointFlag = flagValue(coordinator.container, "checkpoint-dir");
  if (checkpointFlag !== undefined && checkpointFlag !== jobSpec.checkpoint?.dir) {
    errors.push(`coordinator --checkpoint-dir=${checkpointFlag} differs from the job's checkpoint.dir`);
  }
}

function checkAccelerator(objects, accelerator, errors, context) {
  const workers = context.workers;
  if (!workers) return;
  const pod = workers.spec.template.spec;
  const container = pod.containers[0];
  const devices = envEntry(container, "RETORT_DEVICES")?.value ?? flagValue(container, "devices");
  const gpus = ["requests", "limits"].map((k) => container.resources?.[k]?.["nvidia.com/gpu"]);
  if (accelerator === "gpu") {
    if (gpus.some((g) => !(Number(g) >= 1))) errors.push(`${describe(workers)}: must request and limit nvidia.com/gpu`);
    if (Object.keys(pod.nodeSelector ?? {}).length === 0) errors.push(`${describe(workers)}: needs a nodeSelector for GPU nodes`);
    if (!(pod.tolerations ?? []).some((t) => t.key === "nvidia.com/gpu")) errors.push(`${describe(workers)}: needs a nvidia.com/gpu toleration`);
    if (!/^cuda:\d+/.test(devices ?? "")) errors.push(`${describe(workers)}: devices must be cuda:N, got ${devices}`);
  } else {
    for (const object of objects) {
      for (const { container: c } of containersOf(object)) {
        if (JSON.stringify(c.resources ?? {}).includes("nvidia.com/gpu")) errors.push(`${describe(object)}: requests a GPU in the cpu overlay`);
      }
    }
    if (devices !== "cpu") errors.push(`${describe(workers)}: devices must be cpu, got ${devices}`);
  }
}

// Runs every rule on the objects of one rendered overlay. `accelerator` is "cpu" or "gpu".
export function checkPolicy(objects, accelerator, protoMessages) {
  const errors = [];
  const context = {};
  checkContainerSecurity(objects, errors);
  checkVolumeReferences(objects, errors);
  checkCoordinator(objects, errors, context);
  if (context.jobSpec) {
    for (const m of checkJobSpec(context.jobSpec, protoMessages)) errors.push(`job spec: ${m}`);
  }
  checkWorkers(objects, errors, context);
  checkSharedStorage(objects, errors, context);
  checkAccelerator(objects, accelerator, errors, context);
  return errors;
}
