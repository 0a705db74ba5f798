"""Checks the deploy folder offline: the Helm values against the Dagster chart's own schema, and the project's
own manifests against the Kubernetes schemas (kubernetes-validate bundles them).

    python bench/deploy_check.py --chart-schema PATH/TO/dagster/values.schema.json

The chart's schema comes with the chart (`helm pull dagster/dagster --version 1.13.27 --untar`). It checks the
values after Helm merged them with the chart's defaults, so the check drops `required` and keeps every type,
enum and unknown-key rule: a misspelt or misplaced key, or a value of the wrong shape, fails. Its references to
kubernetesjsonschema.dev resolve to kubernetes-validate's bundled definitions, so nothing is fetched.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
K8S_VERSION = "1.33.0"


def k8s_definitions(version: str = K8S_VERSION) -> dict:
    """The bundled Kubernetes definitions, addressed the way the chart's schema addresses them (#/definitions/…)."""
    import kubernetes_validate

    path = (Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{version}-local"
            / "_definitions.json")
    text = path.read_text().replace('"#/$defs/', '"#/definitions/')
    return {"definitions": json.loads(text)["$defs"]}


def without_required(schema):
    """The schema with every `required` list dropped (Helm validates values merged with the chart's defaults)."""
    if isinstance(schema, dict):
        return {k: without_required(v) for k, v in schema.items() if k != "required"}
    if isinstance(schema, list):
        return [without_required(v) for v in schema]
    return schema


def values_errors(values: dict, chart_schema: dict) -> list[str]:
    """Each place where the values break the chart's schema, as `path: message`."""
    from jsonschema import Draft7Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    definitions = Resource(contents=k8s_definitions(), specification=DRAFT7)
    registry = Registry(retrieve=lambda uri: definitions)
    validator = Draft7Validator(without_required(chart_schema), registry=registry)
    return [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:200]}"
            for e in validator.iter_errors(values)]


def manifest_errors(folder: Path, version: str = K8S_VERSION) -> list[str]:
    """Each problem kubernetes-validate finds in the folder's manifests, in strict mode (no unknown fields)."""
    import kubernetes_validate

    errors = []
    for path in sorted(folder.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as err:
                where = ".".join(map(str, err.path)) or "(top)"
                errors.append(f"{path.name} {doc.get('kind')}/{doc['metadata']['name']} {where}: {err.message[:200]}")
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chart-schema", type=Path, help="the chart's values.schema.json, or its folder (skipped if not given)")
    args = parser.parse_args()
    problems = manifest_errors(ROOT / "deploy" / "manifests")
    print(f"deploy/manifests: {len(problems)} problem(s) against Kubernetes {K8S_VERSION} (strict)")
    if args.chart_schema:
        schema = args.chart_schema / "values.schema.json" if args.chart_schema.is_dir() else args.chart_schema
        if not schema.is_file():
            parser.error(f"{schema}: no such file (the chart's values.schema.json, or the chart folder holding it)")
        values = yaml.safe_load((ROOT / "deploy" / "values.yaml").read_text())
        found = values_errors(values, json.loads(schema.read_text()))
        print(f"deploy/values.yaml: {len(found)} problem(s) against {schema}")
        problems += found
    for line in problems:
        print("  " + line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
