"""Text and Markdown of ``servelab build`` (one report per run of the build stage)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servelab.build.stage import ArmBuilds, ExperimentBuilds

FORMATS = ("text", "json", "markdown")


def _mb(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 1e6:.1f} MB"


def _arm_lines(a: ArmBuilds) -> list[str]:
    rep = a.reproducibility
    out = [f"{a.arm}: {rep.summary}"]
    if a.records:
        r = a.records[0]
        p = r.primary
        b = r.builder
        out += [
            f"  digest {p.manifest_digest} ({p.platform}); config {p.config_digest}",
            f"  size {_mb(p.compressed_size)} compressed, {_mb(p.uncompressed_size)} "
            f"uncompressed, {len(p.layers)} layers",
            f"  SOURCE_DATE_EPOCH={r.source_date_epoch} ({r.source_date_epoch_from}); "
            f"builder {b.driver} (engine {b.engine_version}, buildx {b.buildx_version}, "
            f"BuildKit {b.buildkit_version})" + (" created by servelab"
                                                 if b.created_by_servelab else ""),
        ]
        out += [f"  repeat {x.repeat}: {x.manifest_digest} in {x.wall_s:.1f}s" for x in a.records]
        out += [f"  note: {n}" for n in r.notes]
    out += [f"  why: {line}" for line in rep.explanation]
    if rep.note:
        out.append(f"  note: {rep.note}")
    return out


def render_text(result: ExperimentBuilds, kept: list[str]) -> str:
    lines = [f"servelab build: run {result.run_id}, output in {result.out_dir}"]
    for a in result.arms:
        lines += _arm_lines(a)
    lines += [f"skipped {s}" for s in result.skipped]
    lines += [f"kept image: {k}" for k in kept]
    return "\n".join(lines) + "\n"


def render_markdown(result: ExperimentBuilds, kept: list[str]) -> str:
    out = ["### servelab build", "", "| Arm | Verdict | Digest | Size (compressed) |",
           "|---|---|---|---|"]
    for a in result.arms:
        r = a.records[0] if a.records else None
        out.append(f"| {a.arm} | {a.reproducibility.summary} | "
                   f"`{r.manifest_digest if r else '-'}` | "
                   f"{_mb(r.primary.compressed_size) if r else '-'} |")
    for a in result.arms:
        if a.reproducibility.explanation:
            out += ["", f"**Why {a.arm} differs:**", ""]
            out += [f"- {x}" for x in a.reproducibility.explanation]
    out += [f"\nKept image: `{k}`" for k in kept]
    return "\n".join(out) + "\n"


def render(result: ExperimentBuilds, kept: list[str], fmt: str) -> str:
    """The build report in *fmt* (one of :data:`FORMATS`)."""
    import json

    if fmt == "json":
        return json.dumps({**result.to_dict(), "kept_images": kept}, indent=2) + "\n"
    if fmt == "markdown":
        return render_markdown(result, kept)
    return render_text(result, kept)
