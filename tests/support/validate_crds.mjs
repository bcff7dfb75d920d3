// Validates Karpenter and KEDA custom resources against the schemas generated from their CRDs
// (npm @kubernetes-models/*). Reads a JSON array of manifests on stdin and prints a JSON array of
// {index, kind, error} for each manifest that fails (empty when all pass). Unknown kinds fail too.
import { readFileSync } from "node:fs";

const MODULES = {
  "karpenter.sh/v1": "@kubernetes-models/karpenter/karpenter.sh/v1/index",
  "karpenter.k8s.aws/v1": "@kubernetes-models/karpenter/karpenter.k8s.aws/v1/index",
  "keda.sh/v1alpha1": "@kubernetes-models/keda/keda.sh/v1alpha1/index",
};

const manifests = JSON.parse(readFileSync(0, "utf8"));
const failures = [];
for (const [index, manifest] of manifests.entries()) {
  const path = MODULES[manifest.apiVersion];
  const Model = path && (await import(path))[manifest.kind];
  if (!Model) {
    failures.push({ index, kind: manifest.kind, error: `no schema for ${manifest.apiVersion} ${manifest.kind}` });
    continue;
  }
  try {
    new Model(manifest).validate();
  } catch (err) {
    failures.push({ index, kind: manifest.kind, error: String(err.message ?? err) });
  }
}
process.stdout.write(JSON.stringify(failures));
