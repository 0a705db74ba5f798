"""The deploy folder as a platform team would apply it: manifests Kubernetes accepts, credentials only through
Secrets the folder creates, and an image that installs exactly the bytes that were tested."""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
sys.path.insert(0, str(ROOT / "bench"))
from deploy_check import manifest_errors  # noqa: E402

CREDENTIAL = re.compile(r"SECRET|PASSWORD|ACCESS_KEY|TOKEN|LOCK_URL", re.I)


def _docs(name: str) -> list[dict]:
    return list(yaml.safe_load_all((DEPLOY / "manifests" / name).read_text()))


def _values() -> dict:
    return yaml.safe_load((DEPLOY / "values.yaml").read_text())


def _commented_run_launcher() -> dict:
    """The run launcher dagster.yaml documents in its comments, parsed as the YAML a user would uncomment."""
    lines = (ROOT / "dagster.yaml").read_text().splitlines()
    start = lines.index("# run_launcher:")
    block = [line[2:] for line in lines[start:] if line.startswith("# ") or line == "#"]
    return yaml.safe_load("\n".join(block))["run_launcher"]


def test_the_manifests_are_objects_kubernetes_accepts():
    assert manifest_errors(DEPLOY / "manifests") == []


def test_a_manifest_with_a_misspelt_field_is_refused(tmp_path):
    service = _docs("serve.yaml")[1]
    service["spec"]["port"] = service["spec"].pop("ports")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(service))
    errors = manifest_errors(tmp_path)
    assert len(errors) == 1 and "Service/rag-serve" in errors[0] and "port" in errors[0]


def test_every_secret_a_pod_reads_is_created_by_the_deploy_folder():
    created = {doc["metadata"]["name"] for doc in _docs("secrets.yaml") if doc["kind"] == "Secret"}
    values = _values()
    named = {values["global"]["postgresqlSecretName"]}
    named |= {s["name"] for d in values["dagster-user-deployments"]["deployments"] for s in d["envSecrets"]}
    named |= {s["name"] for s in values["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"]}
    serve = _docs("serve.yaml")[0]["spec"]["template"]["spec"]["containers"][0]
    named |= {e["secretRef"]["name"] for e in serve["envFrom"]}
    named |= set(_commented_run_launcher()["config"]["env_secrets"])
    assert named == created


def test_no_credential_is_a_plain_environment_value():
    values = _values()
    plain = [e["name"] for d in values["dagster-user-deployments"]["deployments"] for e in d["env"]]
    plain += [e["name"] for e in _docs("serve.yaml")[0]["spec"]["template"]["spec"]["containers"][0]["env"]]
    plain += _commented_run_launcher()["config"]["env_vars"]   # dagster-k8s copies these into each Job spec
    assert plain and not [name for name in plain if CREDENTIAL.search(name)]


def test_the_image_installs_the_locked_bytes_on_a_base_pinned_by_digest():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM \S+@sha256:[0-9a-f]{64}$", dockerfile, re.M)
    assert "pip install --require-hashes --no-deps -r requirements.lock" in dockerfile
    lock = (DEPLOY / "requirements.lock").read_text()
    requirements = re.findall(r"^[A-Za-z0-9].*$", lock, re.M)
    hashed = dict(re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+) \\\n\s+--hash=sha256:[0-9a-f]{64}", lock, re.M))
    assert len(requirements) == len(hashed) > 100
    assert hashed["torch"] == "2.13.0+cpu" and hashed["dagster"] == "1.13.27"


def test_the_lock_holds_every_dependency_the_image_needs():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = project["dependencies"] + project["optional-dependencies"]["production"] \
        + project["optional-dependencies"]["kubernetes"]
    lock = (DEPLOY / "requirements.lock").read_text().lower().replace("_", "-")
    names = {re.match(r"[A-Za-z0-9_.\-]+", dep).group().lower().replace("_", "-") for dep in needed}
    assert not [name for name in names if f"\n{name}==" not in lock]
