"""plaintext-secret: tokens and keys written into the manifest instead of a Secret."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

from servelab.findings import Finding, Severity
from servelab.k8s.checks import Context, hit, object_hit, rule
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
SECRET_WORDS = {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "APIKEY", "CREDENTIAL",
                "CREDENTIALS"}
#: Words of a variable name whose value may be a passphrase (spaces allowed in the value).
PASSPHRASE_WORDS = {"PASSWORD", "PASSWD", "PASSPHRASE", "SECRET"}
#: A private key written out (PEM), whatever the variable is called.
PEM = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
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


#: Last words of a variable name that hold where the secret is, not the secret.
NOT_VALUES = {"FILE", "PATH", "DIR", "NAME", "REF", "ID"}


def _credential_like(value: str) -> bool:
    """A value that looks generated (a cloud key): long, one word, letters and digits."""
    return (len(value) >= 16 and " " not in value and bool(re.search(r"[A-Za-z]", value))
            and bool(re.search(r"\d", value)) and not value.startswith(("/", "http")))


def _passphrase(parts: list[str], value: str) -> bool:
    """A passphrase written with spaces in a variable named like a password."""
    return bool(PASSPHRASE_WORDS & set(parts)) and len(value) >= 12 and len(value.split()) >= 2


def _named_secret(name: str, value: str) -> tuple[str, Severity] | None:
    """A secret by its variable's name: ``*_PASSWORD``, ``*_SECRET``, ``AZURE_*_KEY``,
    ``AWS_SECRET_ACCESS_KEY``, ``*_KEY`` with a generated-looking value."""
    parts = name.upper().replace("-", "_").split("_")
    named = bool(SECRET_WORDS & set(parts)) or any(p in SECRET_PAIRS for p in pairwise(parts))
    if PLACEHOLDER.search(value) or REFERENCE.match(value) or parts[-1] in NOT_VALUES:
        return None
    if value.startswith(("/", "http://", "https://", "file:")):
        return None
    if _passphrase(parts, value):
        return "a passphrase", Severity.WARNING
    if not named and parts[-1] == "KEY" and _credential_like(value):
        return "a key", Severity.WARNING
    if not named or len(value) < 8 or " " in value:
        return None
    if re.fullmatch(r"[\d.]+", value) or value.startswith(("/", "http://", "https://")):
        return None
    return "a secret", Severity.WARNING


def secret_kind(name: str, value: str) -> tuple[str, Severity] | None:
    """What *value* of variable *name* is, when it is a secret in plain text."""
    value = value.strip()
    if PEM.search(value):
        return "a private key (PEM block)", Severity.ERROR
    for pattern, what in TOKEN_FORMATS:
        if pattern.match(value):
            return what, Severity.ERROR
    if token_variable(name) and not REFERENCE.match(value) and not re.fullmatch(r"[\d.]+", value):
        placeholder = PLACEHOLDER.search(value) or len(value) < 8 or " " in value
        return ("a literal value, a placeholder for now" if placeholder else "a token"), \
            Severity.WARNING
    return _named_secret(name, value)


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


#: Command-line flags that take a credential: ``--api-key=…``, ``--hf-token …``.
TOKEN_FLAG = re.compile(
    r"^--?((?:hf[-_]|hub[-_]|hugging[-_]?face[-_]|auth[-_]|access[-_]|api[-_]|ngc[-_])?"
    r"(?:token|api[-_]?key|password|passwd|secret|secret[-_]key))(?:=(.*))?$", re.IGNORECASE)
#: A flag and its value inside one shell string (``sh -c "vllm serve --api-key abc"``).
TOKEN_IN_TEXT = re.compile(
    r"(?:^|\s)(--?(?:hf[-_]|hub[-_]|auth[-_]|access[-_]|api[-_]|ngc[-_])?(?:token|api[-_]?key|"
    r"password|secret))(?:=|\s+)(\"[^\"]*\"|'[^']*'|[^\s;&|]+)", re.IGNORECASE)
#: A value that names the secret instead of holding it: ``$HF_TOKEN``, ``${X}``, ``$(X)``.
SHELL_REFERENCE = re.compile(r"^[\"']?\$[({]?[A-Za-z_]\w*[)}]?[\"']?$")


def _flag_value(value: str) -> bool:
    """Whether a flag's value is a literal credential (not a reference, placeholder, flag)."""
    value = value.strip().strip("\"'")
    return (len(value) >= 8 and not value.startswith("-") and not SHELL_REFERENCE.match(value)
            and not REFERENCE.match(value) and not PLACEHOLDER.search(value)
            and not value.startswith(("/", "file:")))


def _argv_values(c: Container) -> Iterator[Value]:
    """Credentials given on the command line: ``--api-key=X``, ``--hf-token X``, and the same
    inside a ``sh -c`` string."""
    for key in ("command", "args"):
        words = [str(a) for a in as_list(c.data.get(key))]
        for i, word in enumerate(words):
            m = TOKEN_FLAG.match(word)
            at = i  # the index of the value: the flag's own, or the next word's
            if m and m.group(2) is not None:
                found = [(m.group(1), m.group(2))]
            elif m and i + 1 < len(words):
                found, at = [(m.group(1), words[i + 1])], i + 1
            else:
                found = [(f.lstrip("-"), v) for f, v in TOKEN_IN_TEXT.findall(word)]
            for flag, value in found:
                if _flag_value(value):
                    yield Value(f"--{flag}", value.strip().strip("\"'"), None, (*c.path, key, at))


def _said(v: Value, what: str) -> str:
    if v.name.startswith("--"):
        return f"{v.name} is given {what} on the command line ({_masked(v.value)})"
    if what.startswith("a literal"):
        return (f"{v.name} is given {what} ({v.value.strip()[:30]!r}): filled in, the token goes "
                "into git with the manifest")
    return f"{v.name} holds {what} in plain text ({_masked(v.value)})"


def _flag_kind(v: Value) -> tuple[str, Severity]:
    known = secret_kind("TOKEN", v.value)
    return known if known is not None and known[1] is Severity.ERROR else ("a credential",
                                                                           Severity.ERROR)


def _also(f: Finding, v: Value, ctx: Context) -> Finding:
    """The same value committed in a Secret: one finding, both places named."""
    places = ctx.secret_literals.get(v.value.strip(), [])
    if not places:
        return f
    shown = []
    for obj, key, path in places:
        ctx.secrets_told.add((obj.ref, key))
        shown.append(f"{obj.ref} key {key!r} ({obj.source.file}:{obj.locate(path).line})")
    f.message += "; the same value is committed in " + ", ".join(shown)
    f.context["also"] = ", ".join(shown)
    return f


@rule(
    "plaintext-secret",
    Severity.ERROR,
    "a token or key is written in the manifest (env value, command-line flag, ConfigMap, Ray "
    "runtime_env, a committed Secret's data)",
    rationale="A manifest is committed, rendered into CI logs and readable by anyone who can "
    "read the Deployment or ConfigMap; a Hugging Face, NGC or cloud token there leaks gated "
    "models, registries and buckets. Known token formats (hf_..., nvapi-..., AKIA...) and "
    "private keys (PEM blocks) are errors, whatever the variable is called; other values of "
    "variables named like a secret (*_TOKEN, *_API_KEY, *PASSWORD, *_SECRET, AZURE_*_KEY, a "
    "generated-looking *_KEY, a passphrase with spaces) are warnings. A token variable "
    "(HF_TOKEN, *_TOKEN, *_API_KEY) given any literal value, a placeholder such as <secret> or "
    "changeme included, is the pattern that puts the token into git: a warning too. A "
    "credential flag in args or command (--api-key=..., --hf-token ...) with a literal value "
    "is an error. A Secret object written with literal data or stringData is in git with the "
    "manifests; when a workload holds the same value, one finding names both places.",
    fix="move the value into a Secret and reference it with valueFrom.secretKeyRef; keep the "
    "Secret itself out of git (a secret manager, Sealed Secrets); revoke the exposed token",
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
        if v.obj is not None and v.obj.kind == "ConfigMap":
            ctx.secrets_told.add((v.obj.ref, v.name))
        yield _also(hit("plaintext-secret", w, _said(v, what), v.path, container=c, at=v.obj,
                        line=v.line, severity=severity, fix=FIX.replace("NAME", v.name)), v, ctx)
    for c in (*w.containers, *w.init_containers):
        for v in _argv_values(c):
            what, severity = _flag_kind(v)
            yield _also(hit("plaintext-secret", w, _said(v, what), v.path, container=c,
                            severity=severity, fix=ARG_FIX), v, ctx)


ARG_FIX = ("pass the credential through the environment from a Secret (env: [{name: API_KEY, "
           "valueFrom: {secretKeyRef: ...}}]) and write $(API_KEY) in the argument; revoke the "
           "exposed value")
COMMITTED_FIX = ("keep Secret values out of git: create the Secret from a secret manager (External "
              "Secrets Operator, the Secrets Store CSI driver, Vault) or commit a SealedSecret or "
              "a SOPS-encrypted file instead; rotate the values already committed")
#: A Secret value that is only a template for the real one (rendered or filled in elsewhere).
TEMPLATED = re.compile(r"^\s*$|^\$\{?\w+\}?$|^<[^>]*>$|^\{\{.*\}\}$", re.DOTALL)


def _decoded(value: str) -> str:
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return value


def secret_literals(objects: list[K8sObject]) -> list[tuple[K8sObject, str, JsonPath, str]]:
    """(Secret, key, path, value) of every literal value of the Secrets written in the
    manifests: ``stringData`` as written, ``data`` decoded from base64."""
    out: list[tuple[K8sObject, str, JsonPath, str]] = []
    for obj in objects:
        for section in ("stringData", "data"):
            for key, raw in as_dict(obj.data.get(section)).items():
                if not isinstance(raw, str):
                    continue
                value = _decoded(raw) if section == "data" else raw
                if not TEMPLATED.match(value):
                    out.append((obj, str(key), (section, str(key)), value.strip()))
    return out


def committed_secrets(ctx: Context) -> Iterator[Finding]:
    """One finding per Secret written with literal values, for the keys no workload finding
    named already (a workload holding the same value names the Secret in its finding)."""
    by_secret: dict[str, list[tuple[K8sObject, str, JsonPath, str]]] = {}
    for item in secret_literals(ctx.inventory.secrets):
        if (item[0].ref, item[1]) not in ctx.secrets_told:
            by_secret.setdefault(item[0].ref, []).append(item)
    for items in by_secret.values():
        obj, _, path, _ = items[0]
        keys = ", ".join(dict.fromkeys(k for _, k, _, _ in items))
        sections = " and ".join(dict.fromkeys(str(p[0]) for _, _, p, _ in items))
        known = [secret_kind("TOKEN", v) for _, _, _, v in items]
        severity = Severity.ERROR if any(k and k[1] is Severity.ERROR for k in known) else (
            Severity.WARNING)
        yield object_hit("plaintext-secret", obj, f"{obj.ref} holds literal values in "
                         f"{sections} (key(s): {keys}): it is committed with the manifests, so "
                         "the values are in git for anyone who can read the repository",
                         path, severity=severity, fix=COMMITTED_FIX)


def configmap_secrets(ctx: Context) -> Iterator[Finding]:
    """Secrets in ConfigMaps that no checked container's finding named already (a ConfigMap
    given alone, or read by no workload here): a ConfigMap is not secret, whoever reads it."""
    for cm in ctx.inventory.configmaps:
        for key, value in as_dict(cm.data.get("data")).items():
            if not isinstance(value, str) or (cm.ref, str(key)) in ctx.secrets_told:
                continue
            kind = secret_kind(str(key), value)
            if kind is None:
                continue
            what, severity = kind
            v = Value(str(key), value, cm, ("data", str(key)))
            yield object_hit("plaintext-secret", cm, f"{cm.ref}: {_said(v, what)}; a ConfigMap "
                             "is readable by anyone who can read the namespace's "
                             "configuration, and it is committed with the manifests",
                             ("data", str(key)), severity=severity,
                             fix=FIX.replace("NAME", str(key)))
