import importlib.util
import subprocess
import sys


def is_installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def requirements_met(requirements_file: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    with open(requirements_file, encoding="utf8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or "==" not in line:
                continue
            name, wanted = line.split("==", 1)
            try:
                if version(name) != wanted:
                    return False
            except PackageNotFoundError:
                return False
    return True


def run_pip(command: str, desc: str) -> None:
    print(f"Installing {desc}")
    subprocess.run(f'"{sys.executable}" -m pip {command} --prefer-binary', shell=True, check=True)
