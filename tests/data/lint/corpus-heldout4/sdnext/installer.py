"""SD.Next installer: torch for the chosen backend, then every requirements.txt line that is missing."""
import importlib.metadata
import logging
import subprocess
import sys

log = logging.getLogger("sd")
args = None


def pip(arg: str, uv: bool = True) -> str:
    cmd = f"uv pip {arg}" if uv else f'"{sys.executable}" -m pip {arg}'
    result = subprocess.run(cmd, shell=True, check=False, capture_output=True, text=True)
    return result.stdout


def installed(package: str) -> bool:
    name = package.split("==")[0].split("[")[0].strip()
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return "==" not in package or package.split("==")[1].strip() == version


def install(package: str, friendly: str = None) -> None:
    if not installed(package):
        log.info(f"Install: package={friendly or package}")
        pip(f"install --upgrade {package}", uv=getattr(args, "uv", False))


def check_torch() -> None:
    if getattr(args, "use_cuda", False):
        install("torch==2.8.0+cu128 torchvision==0.23.0+cu128 --index-url https://download.pytorch.org/whl/cu128", "torch")


def install_requirements() -> None:
    with open("requirements.txt", encoding="utf8") as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line:
                install(line)


def install_optional() -> None:
    for package in ["onnxruntime-gpu", "insightface", "gfpgan", "clip_interrogator==0.6.0"]:
        install(package)
