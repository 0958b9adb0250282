"""plaintext-secret: tokens and keys written into the manifest instead of a Secret."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

from servelab.findings import Finding, Severity
from servelab.k8s.checks import Context, hit, rule
from servelab.k8s.model import Container, K8sObject, Workload, as_dict, as_list
from servelab.k8s.rayenv import env_field, runtime_envs
from servelab.yamlsafe import JsonPath

#: Known token formats -> what they are.
TOKEN_FORMATS = (
    (re.compile(r"^hf_[A-Za-z0-9]{30,}$"), "a Hugging Face token"),
    (re.compile(r"^nvapi-[A-Za-z0-9_-]{20,}$"), "an NVIDIA API key"),
    (re.compile(r"^sk-[A-Za-z0-9_-]{20,}$"), "an API key"),
    (re.compile(r"^(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{20,})$"), "a GitHub token"),
    (re.compile(r"^glpat-[A-Za-z0-9_-]{20,}$"), "a GitLab token"),
    (re.compile(r"^(AKIA|ASIA)[0-9A-Z]{16}$"), "an AWS access key id"),
    (re.compile(r"^xox[abprs]-[A-Za-z0-9-]{10,}$"), "a Slack token"),
)
#: Parts of a variable name that say it holds a secret (split on ``_``).
SECRET_WORDS = {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIAL", "CREDENTIALS"}
SECRET_PAIRS = {("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"),
                ("AUTH", "KEY")}
#: Values that only stand in for the secret (a template placeholder, an example).
PLACEHOLDER = re.compile(
    r"^\$|^<.*>$|^\{\{.*\}\}$|your|xxx|changeme|change-me|change_me|replace|example|dummy|"
    r"placeholder|redacted|^\*+$|^(empty|none|null|true|false|unused|not-?needed|token)$",
    re.IGNORECASE)
#: Variables that hold an access token (``HF_TOKEN``, ``HUGGING_FACE_HUB_TOKEN``, ``*_TOKEN``,
#: ``*_API_KEY``): any literal value is reported, a placeholder too (the pattern puts the real
#: token into git as soon as someone fills it in).
TOKEN_VARIABLE = re.compile(r"(^|_)(TOKEN|API_?KEY)$")
#: Values that reference the token instead of holding it: Kubernetes' ``$(VAR)``, an
#: unrendered template, nothing.
REFERENCE = re.compile(r"^\$\([A-Za-z_]\w*\)$|^\{\{.*\}\}$|^$")
FIX = ("store it in a Secret and reference it: env: [{name: NAME, valueFrom: {secretKeyRef: "
       "{name: <secret>, key: <key>}}}]; revoke the exposed value, it is in the manifest's "
       "history")


@dataclass(frozen=True)
class Value:
    name: str
    value: str
    obj: K8sObject | None
    path: JsonPath
    line: int | None = None


def token_variable(name: str) -> bool:
    """``HF_TOKEN``, ``HUGGING_FACE_HUB_TOKEN``, ``NGC_API_KEY``, ``VLLM_APIKEY`` (not
    ``TOKENIZERS_PARALLELISM``, ``MAX_NUM_TOKENS``)."""
    return bool(TOKEN_VARIABLE.search(name.upper().replace("-", "_")))


def secret_kind(name: str, value: str) -> tuple[str, Severity] | None:
    """What *value* of variable *name* is, when it is a secret in plain text."""
    value = value.strip()
    for pattern, what in TOKEN_FORMATS:
        if pattern.match(value):
            return what, Severity.ERROR
    if token_variable(name) and not REFERENCE.match(value) and not re.fullmatch(r"[\d.]+", value):
        placeholder = PLACEHOLDER.search(value) or len(value) < 8 or " " in value
        return ("a literal value, a placeholder for now" if placeholder else "a token"), \
            Severity.WARNING
    parts = name.upper().replace("-", "_").split("_")
    named = bool(SECRET_WORDS & set(parts)) or any(p in SECRET_PAIRS for p in pairwise(parts))
    if not named or len(value) < 8 or " " in value or PLACEHOLDER.search(value):
        return None
    if re.fullmatch(r"[\d.]+", value) or value.startswith(("/", "http://", "https://")):
        return None
    return "a secret", Severity.WARNING


def _masked(value: str) -> str:
    return value[:4] + "…" if len(value) > 8 else "…"


def _env(c: Container) -> Iterator[Value]:
    for i, item in enumerate(as_list(c.data.get("env"))):
        item_d = as_dict(item)
        if isinstance(item_d.get("value"), str):
            yield Value(str(item_d.get("name")), item_d["value"], None,
                        (*c.path, "env", i, "value"))


def _configmaps(w: Workload, c: Container, ctx: Context) -> Iterator[Value]:
    """Values of the ConfigMaps the container takes its environment from."""
    names = {as_dict(as_dict(s).get("configMapRef")).get("name")
             for s in as_list(c.data.get("envFrom"))}
    names |= {as_dict(as_dict(as_dict(e).get("valueFrom")).get("configMapKeyRef")).get("name")
              for e in as_list(c.data.get("env"))}
    for cm in ctx.inventory.configmaps:
        if cm.name in names and cm.same_namespace(w.obj):
            for key, value in as_dict(cm.data.get("data")).items():
                if isinstance(value, str):
                    yield Value(str(key), value, cm, ("data", str(key)))


def _ray(w: Workload) -> Iterator[Value]:
    for env in runtime_envs(w.obj):
        for name, value in as_dict(env.data.get("env_vars")).items():
            if isinstance(value, str):
                yield Value(str(name), value, w.obj, env_field(w.obj),
                            env.source.line((*env.inner, "env_vars", str(name))))


@rule(
    "plaintext-secret",
    Severity.ERROR,
    "a token or key is written in the manifest (env value, ConfigMap, Ray runtime_env)",
    rationale="A manifest is committed, rendered into CI logs and readable by anyone who can "
    "read the Deployment or ConfigMap; a Hugging Face, NGC or cloud token there leaks gated "
    "models, registries and buckets. Known token formats (hf_..., nvapi-..., AKIA...) are "
    "errors; other values of variables named like a secret (*_TOKEN, *_API_KEY, *PASSWORD) "
    "are warnings. A token variable (HF_TOKEN, *_TOKEN, *_API_KEY) given any literal value, a "
    "placeholder such as <secret> or changeme included, is the pattern that puts the token "
    "into git: a warning too.",
    fix="move the value into a Secret and reference it with valueFrom.secretKeyRef; revoke "
    "the exposed token",
)
def plaintext_secret(w: Workload, ctx: Context) -> Iterator[Finding]:
    values: list[tuple[Container | None, Value]] = [
        (c, v) for c in (*w.containers, *w.init_containers)
        for v in (*_env(c), *_configmaps(w, c, ctx))]
    if ctx.leads(w) and w.kind in ("RayService", "RayJob"):
        values += [(None, v) for v in _ray(w)]
    for c, v in values:
        kind = secret_kind(v.name, v.value)
        if kind is None:
            continue
        what, severity = kind
        said = (f"{v.name} is given {what} ({v.value.strip()[:30]!r}): filled in, the token goes "
                "into git with the manifest" if what.startswith("a literal") else
                f"{v.name} holds {what} in plain text ({_masked(v.value)})")
        yield hit("plaintext-secret", w, said, v.path, container=c, at=v.obj, line=v.line,
                  severity=severity, fix=FIX.replace("NAME", v.name))
