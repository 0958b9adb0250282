import os
import subprocess
import sys

python = sys.executable


def run_pip(command: str, desc: str) -> None:
    subprocess.run(f'"{python}" -m pip {command} --prefer-binary', shell=True, check=True)


def prepare_environment() -> None:
    requirements = os.environ.get("REQS_FILE", "requirements_versions.txt")
    subprocess.check_call([python, "-m", "pip", "install", "-r", requirements])
    if not os.path.isdir("extensions"):
        return
    for ext in sorted(os.listdir("extensions")):
        req = os.path.join("extensions", ext, "requirements.txt")
        if os.path.isfile(req):
            run_pip(f"install -r {req}", f"requirements for {ext}")


def start() -> None:
    import webui

    webui.serve()
